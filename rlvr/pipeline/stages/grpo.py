"""Stage `grpo@{variant}`: train the variant once per seed in its `seeds`, seed n from SFT seed n's
checkpoint (chain n), so that every interval over seeds includes the start's own variance."""

from __future__ import annotations

import torch

from rlvr.configs import GRPOConfig
from rlvr.grpo import GRPOData, seed_summary, train_grpo
from rlvr.pipeline import checkpoint
from rlvr.pipeline.config import Params
from rlvr.pipeline.curves import curve_band, split_curve
from rlvr.pipeline.determinism import thread_budget
from rlvr.pipeline.files import read_heldout, read_jsonl, write_tsv
from rlvr.pipeline.paths import GRPOPaths, SFTPaths
from rlvr.pipeline.records import write_metrics
from rlvr.pipeline.seeds import (
    SeedResult,
    load_start,
    over_seeds,
    pick,
    run_name,
    seed_results,
    tracked,
    write_curves,
)
from rlvr.pipeline.specs import config_hash
from rlvr.stats import seed_metrics
from rlvr.tasks import Problem, problems_of
from rlvr.tokenizer import Tokenizer

# The final numbers each run shows in MLflow (a seed's own; the stage run's: their seed means), named
# as in the metrics file. Every step's values are the seed runs' curves; the rest is in the JSON.
KEY_METRICS = (
    "eval_acc_start",
    "eval_acc_final",
    "eval_acc_gain",
    "reward_final",
    "entropy_nats_final",
    "kl_k3_nats_max",
    "clip_frac_max",
    "frac_reward_zero_std_mean",
)


def train_seed(
    seed: int,
    cfg: GRPOConfig,
    max_new_tokens: int,
    train: list[Problem],
    evals: list[Problem],
    start: SFTPaths,
    start_hash: str,
    device: str,
) -> SeedResult:
    """One seed of the variant on `device`, from its chain's SFT checkpoint (SFT seed `seed`)."""
    tok = Tokenizer()
    policy = load_start(start, seed, cfg.sft, start_hash, tok, device)
    data = GRPOData(train, evals, tok, max_new_tokens)
    gen = torch.Generator(device=device).manual_seed(seed)
    curve = train_grpo(policy, cfg, data, gen, shared_prefix=True)
    return SeedResult(seed_summary(curve), curve, policy.state_dict())


def run(params: Params, name: str, paths: GRPOPaths, progress: bool = True) -> dict:
    cfg = params.variant(name)
    task = params.task(cfg.task)
    train = problems_of(read_jsonl(paths.start.data.rows), cfg.task)
    held = problems_of(read_heldout(paths.start.data.heldout), cfg.task)
    evals = held or train  # single_digit has no held-out split: chapter A evaluates on its 55 prompts
    tok = Tokenizer()
    start_hash = config_hash("sft", cfg.sft, params)
    model = None
    for seed in cfg.seeds:  # fail before any training if a chain's start is missing or not the one
        model = load_start(paths.start, seed, cfg.sft, start_hash, tok)
    tags = {"task": cfg.task, "variant": name}
    own_hash = config_hash("grpo", name, params)
    per_seed, run_ids, eval_curves = {}, {}, {}
    with (
        seed_results(
            train_seed,
            cfg.seeds,
            (cfg, task.max_new_tokens, train, evals, paths.start, start_hash, params.device),
            thread_budget(params.threads),
            params.device,
        ) as results,
        tracked("grpo", name, params, tags, start=results.started) as mlrun,
    ):
        for seed, result, child in over_seeds(
            mlrun,
            cfg.seeds,
            results,
            run_name("grpo", name),
            tags,
            KEY_METRICS,
            progress,
        ):
            model.load_state_dict(result.state)
            checkpoint.save(
                paths.checkpoint(seed), model, tok, f"{run_name('grpo', name)}/seed{seed}", own_hash
            )
            for path in (
                *write_curves(paths.curve(seed), paths.eval_curve(seed), result.curve),
                paths.checkpoint(seed),
            ):
                child.log_artifact(path, "seed")
            per_seed[seed], run_ids[seed], eval_curves[seed] = (
                result.summary,
                child.run_id,
                split_curve(result.curve)[1],
            )
        metrics = {
            "variant": name,
            "task": cfg.task,
            "sft": cfg.sft,
            "seeds": cfg.seeds,
            **seed_metrics(per_seed),
            "mlflow_run_id": mlrun.run_id,
            "mlflow_seed_run_ids": {str(s): r for s, r in run_ids.items()},
            "params_hash": own_hash,
        }
        write_metrics(paths.metrics, metrics)
        band = curve_band(list(eval_curves.values()), "eval_acc")
        write_tsv(paths.eval_mean, band)
        mlrun.log_steps({"eval_acc": [(r["step"], r["eval_acc"]) for r in band]})  # the seed mean
        mlrun.log_metrics(pick(metrics, KEY_METRICS))
        for path in (paths.metrics, paths.eval_mean):
            mlrun.log_artifact(path)
    return {
        k: metrics[k]
        for k in ("variant", "eval_acc_start", "eval_acc_final", "mlflow_run_id")
        if k in metrics
    }
