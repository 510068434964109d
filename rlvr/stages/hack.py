"""Stage `hack`: GRPO against chapter A's substring verifier, once per seed; per-step curves, the
sampled responses at the start, middle and end, and a figure."""

from __future__ import annotations

from dataclasses import replace

import torch

from rlvr import checkpoint, plots
from rlvr.config import Params
from rlvr.grpo import train_grpo
from rlvr.hack import hack_metrics, hack_summary
from rlvr.paths import HackPaths
from rlvr.pipeline import config_hash
from rlvr.runtime import read_jsonl, write_json, write_tsv
from rlvr.stages.common import log_row, over_seeds, run_name, tracked
from rlvr.stats import seed_metrics
from rlvr.tasks import problems_of
from rlvr.tokenizer import Tokenizer
from rlvr.verifiers import substring_reward


def run(params: Params, paths: HackPaths, progress: bool = True) -> dict:
    cfg = params.hack
    seeds = params.grpo.seeds
    grpo_cfg = replace(params.variant(cfg.variant), steps=cfg.steps, temperature=cfg.temperature)
    train = problems_of(read_jsonl(paths.start.data.rows), grpo_cfg.task)
    tok = Tokenizer()
    start = {"run": run_name("sft", cfg.sft), "config_hash": config_hash("sft", cfg.sft, params)}
    checkpoint.load(paths.start.checkpoint, tok, **start)  # fail before any training if it is not the one
    reward = lambda resp, answers, n: substring_reward(resp, answers, n, tok)  # noqa: E731
    sample_steps = {1, (cfg.steps + 1) // 2, cfg.steps}
    own_hash = config_hash("hack", None, params)
    tables: dict[int, dict] = {}
    tags = {"task": grpo_cfg.task, "variant": f"hack:{cfg.variant}"}

    def train_one(seed: int, child) -> dict:
        policy = checkpoint.load(paths.start.checkpoint, tok, **start)
        samples: dict[int, list] = {}
        curve = train_grpo(policy, grpo_cfg, cfg.max_new_tokens, train, train, tok, torch.Generator().manual_seed(seed),
                           reward_fn=reward, progress=progress, desc=f"hack seed {seed}", on_step=log_row(child),
                           batch_metrics=hack_metrics(tok, samples, sample_steps, cfg.sample_rows))
        tables[seed] = {str(k): v for k, v in sorted(samples.items())}
        checkpoint.save(paths.checkpoint(seed), policy, tok, f"hack/seed{seed}", own_hash)
        write_tsv(paths.curve(seed), curve)
        return hack_summary(curve, cfg.window)

    with tracked("hack", None, params, tags) as mlrun:
        finals, _ = over_seeds(mlrun, seeds, params.threads, "hack", tags, train_one)
        rose = sum(finals[s]["digits_per_response_end"] > finals[s]["digits_per_response_start"] for s in seeds)
        metrics = {**seed_metrics(finals), "seeds": seeds, "seeds_digits_rose": rose, "mlflow_run_id": mlrun.run_id,
                   "params_hash": own_hash}
        write_json(paths.samples, {"steps": sorted(sample_steps), "samples": tables})
        write_json(paths.metrics, metrics)
        plots.hack_curves({s: paths.curve(s) for s in seeds}, paths.figure)
        mlrun.log_metrics({k: v for k, v in metrics.items() if k not in ("ci95", "per_seed")})
        mlrun.log_artifact(paths.samples)
        mlrun.log_artifact(paths.figure)
    return {k: metrics[k] for k in ("reward_mean_end", "accuracy_end", "digits_per_response_end")}
