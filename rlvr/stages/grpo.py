"""Stage `grpo@{variant}`: train the variant from its SFT checkpoint once per seed in `grpo.seeds`."""

from __future__ import annotations

import torch

from rlvr import checkpoint
from rlvr.config import Params
from rlvr.grpo import seed_summary, train_grpo
from rlvr.paths import GRPOPaths
from rlvr.pipeline import config_hash
from rlvr.runtime import read_jsonl, write_json, write_tsv
from rlvr.stages.common import log_row, over_seeds, run_name, tracked
from rlvr.stats import seed_metrics
from rlvr.tasks import problems_of
from rlvr.tokenizer import Tokenizer


def run(params: Params, name: str, paths: GRPOPaths, progress: bool = True) -> dict:
    cfg = params.variant(name)
    task = params.task(cfg.task)
    seeds = params.grpo.seeds
    train = problems_of(read_jsonl(paths.start.data.rows), cfg.task)
    held = problems_of(read_jsonl(paths.start.data.heldout), cfg.task)
    evals = held or train  # single_digit has no held-out split: chapter A evaluates on its 55 prompts
    tok = Tokenizer()
    start = {"run": run_name("sft", cfg.sft), "config_hash": config_hash("sft", cfg.sft, params)}
    checkpoint.load(paths.start.checkpoint, tok, **start)  # fail before any training if it is not the one
    tags = {"task": cfg.task, "variant": name}
    own_hash = config_hash("grpo", name, params)

    def train_one(seed: int, child) -> dict:
        policy = checkpoint.load(paths.start.checkpoint, tok, **start)
        curve = train_grpo(policy, cfg, task.max_new_tokens, train, evals, tok, torch.Generator().manual_seed(seed),
                           progress=progress, on_step=log_row(child), desc=f"{name} seed {seed}")
        checkpoint.save(paths.checkpoint(seed), policy, tok, f"{run_name('grpo', name)}/seed{seed}", own_hash)
        write_tsv(paths.curve(seed), curve)
        return seed_summary(curve)

    with tracked("grpo", name, params, tags) as mlrun:
        per_seed, run_ids = over_seeds(mlrun, seeds, params.threads, run_name("grpo", name), tags, train_one)
        metrics = {"variant": name, "task": cfg.task, "sft": cfg.sft, "seeds": seeds, **seed_metrics(per_seed),
                   "mlflow_run_id": mlrun.run_id, "mlflow_seed_run_ids": {str(s): r for s, r in run_ids.items()},
                   "params_hash": own_hash}
        write_json(paths.metrics, metrics)
        mlrun.log_metrics({k: v for k, v in metrics.items() if k not in ("ci95", "per_seed")})
    return {k: metrics[k] for k in ("variant", "eval_acc_start", "eval_acc_final", "mlflow_run_id") if k in metrics}
