"""Stage `grpo@{variant}`: train the variant from its SFT checkpoint once per seed in its `seeds`."""

from __future__ import annotations

import torch

from rlvr import checkpoint
from rlvr.config import GRPOConfig, Params
from rlvr.grpo import seed_summary, train_grpo
from rlvr.paths import GRPOPaths
from rlvr.pipeline import config_hash
from rlvr.runtime import read_jsonl, thread_budget, write_json, write_tsv
from rlvr.stages.common import SeedResult, over_seeds, run_name, tracked
from rlvr.stats import seed_metrics
from rlvr.tasks import Problem, problems_of
from rlvr.tokenizer import Tokenizer


def train_seed(seed: int, cfg: GRPOConfig, max_new_tokens: int, train: list[Problem], evals: list[Problem],
               start: dict) -> SeedResult:
    """One seed of the variant, from the SFT checkpoint (`start`: its path, run name and hash)."""
    tok = Tokenizer()
    policy = checkpoint.load(tok=tok, **start)
    curve = train_grpo(policy, cfg, max_new_tokens, train, evals, tok, torch.Generator().manual_seed(seed),
                       progress=False)
    return SeedResult(seed_summary(curve), curve, policy.state_dict())


def run(params: Params, name: str, paths: GRPOPaths, progress: bool = True) -> dict:
    cfg = params.variant(name)
    task = params.task(cfg.task)
    train = problems_of(read_jsonl(paths.start.data.rows), cfg.task)
    held = problems_of(read_jsonl(paths.start.data.heldout), cfg.task)
    evals = held or train  # single_digit has no held-out split: chapter A evaluates on its 55 prompts
    tok = Tokenizer()
    start = {"path": paths.start.checkpoint, "run": run_name("sft", cfg.sft),
             "config_hash": config_hash("sft", cfg.sft, params)}
    model = checkpoint.load(tok=tok, **start)  # fail before any training if it is not the one
    tags = {"task": cfg.task, "variant": name}
    own_hash = config_hash("grpo", name, params)
    per_seed, run_ids = {}, {}
    with tracked("grpo", name, params, tags) as mlrun:
        for seed, result, run_id in over_seeds(mlrun, cfg.seeds, thread_budget(params.threads), run_name("grpo", name), tags,
                                               train_seed, (cfg, task.max_new_tokens, train, evals, start), progress):
            model.load_state_dict(result.state)
            checkpoint.save(paths.checkpoint(seed), model, tok, f"{run_name('grpo', name)}/seed{seed}", own_hash)
            write_tsv(paths.curve(seed), result.curve)
            per_seed[seed], run_ids[seed] = result.summary, run_id
        metrics = {"variant": name, "task": cfg.task, "sft": cfg.sft, "seeds": cfg.seeds, **seed_metrics(per_seed),
                   "mlflow_run_id": mlrun.run_id, "mlflow_seed_run_ids": {str(s): r for s, r in run_ids.items()},
                   "params_hash": own_hash}
        write_json(paths.metrics, metrics)
        mlrun.log_metrics({k: v for k, v in metrics.items() if k not in ("ci95", "per_seed")})
    return {k: metrics[k] for k in ("variant", "eval_acc_start", "eval_acc_final", "mlflow_run_id") if k in metrics}
