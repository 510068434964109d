"""Stage `grpo@{variant}`: train the variant from every chain's SFT checkpoint (its `seeds`),
`grpo_seeds` times each with GRPO seeds of its own, so that an interval over chains includes the
start's own variance and the table of variance sources can tell the start's share from GRPO's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlvr.chain import end_summary, grpo_run
from rlvr.configs import GRPOConfig
from rlvr.determinism import thread_budget
from rlvr.grpo_stats import seed_summary
from rlvr.io.files import FileBytes, write_tsv
from rlvr.optim import diverged_at
from rlvr.pipeline.curves import curve_band, split_curve
from rlvr.pipeline.paths import GRPOPaths, unit_name
from rlvr.pipeline.records import write_metrics
from rlvr.pipeline.rundata import read_run_data
from rlvr.pipeline.seeds import (
    carry_starts,
    keep_policy,
    load_start,
    over_seeds,
    run_name,
    tracked,
    with_intervals,
)
from rlvr.pipeline.stageparams import StageParams
from rlvr.pipeline.workers import SeedResult, seed_results
from rlvr.stats import seed_metrics, variance_components
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
# What DVC shows of it (`dvc exp show`), chain means, in the headline vocabulary (records.NAMES)
HEADLINE = {"acc_start": "eval_acc_start", "acc_end": "eval_acc_final"}


@dataclass(frozen=True)
class Units:
    """What every GRPO run of a variant's stage shares but its settings, all by value: its units
    (chain, GRPO seed), the problems (train, held-out, validation), each chain's start checkpoint as
    bytes (checked by `units_of`) and the hash it carries, the response cap and the device."""

    units: list[tuple[int, int]]
    problems: tuple[list[Problem], list[Problem], list[Problem]]
    starts: dict[int, FileBytes]
    start_hash: str
    max_new_tokens: int
    device: str


def train_seed(index: int, cfg: GRPOConfig, units: Units) -> SeedResult:
    """GRPO run units.units[index] = (chain, rep) with settings `cfg`: from the chain's SFT
    checkpoint, `rlvr.chain.grpo_run` (GRPO seed `rep` of that chain; to its controlled end where
    the variant has a target, whose checks come back as the result's `extra`)."""
    seed, rep = units.units[index]
    device = units.device
    policy = load_start(units.starts[seed], seed, cfg.sft, units.start_hash, Tokenizer(), device)
    curve, stop = grpo_run(policy, cfg, units.problems, units.max_new_tokens, seed, rep, device)
    summary = seed_summary(curve)
    if stop is not None:
        summary.update(end_summary(stop))
    return SeedResult(summary, curve, policy.state_dict(), None if stop is None else stop.checks)


def chain_metrics(per_unit: dict[tuple[int, int], dict]) -> dict:
    """The metrics-file layout over chains (`seed_metrics`: each chain's value the mean over its GRPO
    seeds), plus `per_rep` (every GRPO seed's value, per chain) and `variance` (the SD one chain's
    value owes to its start and to GRPO; for the held-out accuracy also to its evaluation, which is
    exact, so that share is 0)."""
    chains = sorted({s for s, _ in per_unit})
    keys = sorted(set.intersection(*(set(v) for v in per_unit.values())))
    reps = {s: [per_unit[u] for u in sorted(per_unit) if u[0] == s] for s in chains}
    per_chain = {s: {k: _mean([r[k] for r in reps[s]]) for k in keys} for s in chains}
    per_rep = {k: [[r[k] for r in reps[s]] for s in chains] for k in keys}
    variance = {}
    for k in ("eval_acc_final", "eval_acc_gain", "kl_k3_nats_max", "reward_final", "entropy_nats_final"):
        if k in per_rep:
            eval_sd = 0.0 if k == "eval_acc_final" else None  # `evaluate`: exact, no sampling noise
            variance[k] = variance_components(per_rep[k], eval_sd)
    return {**seed_metrics(per_chain), "per_rep": per_rep, "variance": variance}


def _mean(values: list[float]) -> float:
    finite = [v for v in values if v == v]
    return sum(finite) / len(finite) if finite else float("nan")


def units_of(params: StageParams, paths: GRPOPaths) -> tuple[Units, Any]:
    """What the stage hands its executor beside its settings (`Units`: every input by value, each
    chain's start checked here), and a model of the starts' shape, to save policies in."""
    cfg = params.config
    start_hash = params.hash_of("sft", cfg.sft)
    data = read_run_data(paths.start.data)
    train, held = problems_of(data.rows, cfg.task), problems_of(data.heldout, cfg.task)
    evals = held or train  # single_digit has no held-out split: chapter A evaluates on its 55 prompts
    val = problems_of(data.validation, cfg.task)
    starts, model = carry_starts(paths.start, cfg.seeds, cfg.sft, start_hash, Tokenizer())
    units = [(s, r) for s in cfg.seeds for r in range(cfg.grpo_seeds)]
    max_new_tokens = params.task(cfg.task).max_new_tokens
    return Units(units, (train, evals, val), starts, start_hash, max_new_tokens, params.device), model


def run(params: StageParams, name: str, paths: GRPOPaths, progress: bool = True) -> dict:
    cfg = params.config  # variant `name`'s settings, handed to its runs as they are
    tok = Tokenizer()
    shared, model = units_of(params, paths)
    units = shared.units
    tags = {"task": cfg.task, "variant": name}
    per_unit, run_ids, eval_curves, eval_chains = {}, {}, [], []
    workers = thread_budget(params.threads)
    with (
        diverged_at(f"variants.{name}"),  # a unit that diverges stops the stage: one line, no outputs
        seed_results(train_seed, list(range(len(units))), (cfg, shared), workers, params.device) as results,
        tracked(params, tags, start=results.started) as mlrun,
    ):
        for (seed, rep), result, child in over_seeds(
            mlrun, units, results, run_name("grpo", name), tags, KEY_METRICS, progress
        ):
            unit = f"{run_name('grpo', name)}/{unit_name(seed, rep)}"
            keep_policy(child, model, tok, result, paths, (seed, rep), unit, params.hash)
            per_unit[seed, rep], run_ids[unit_name(seed, rep)] = result.summary, child.run_id
            eval_curves.append(split_curve(result.curve)[1])
            eval_chains.append(seed)
        metrics = {
            "variant": name,
            "task": cfg.task,
            "sft": cfg.sft,
            "seeds": cfg.seeds,
            "grpo_seeds": cfg.grpo_seeds,
            "target": cfg.target,  # the controlled end's validation pass@1 (null: a fixed budget)
            "steps_cap": cfg.steps,
            **chain_metrics(per_unit),
            "mlflow_run_id": mlrun.run_id,
            "made": mlrun.made,
            "mlflow_seed_run_ids": run_ids,
            "params_hash": params.hash,
        }
        write_metrics(paths.metrics, metrics, HEADLINE)
        band = curve_band(eval_curves, "eval_acc", chains=eval_chains)
        write_tsv(paths.eval_mean, band)
        mlrun.log_steps({"eval_acc": [(r["step"], r["eval_acc"]) for r in band]})  # the seed mean
        mlrun.log_metrics(with_intervals(metrics, KEY_METRICS))
        for path in (paths.metrics, paths.eval_mean):
            mlrun.log_artifact(path)
    return {
        k: metrics[k]
        for k in ("variant", "eval_acc_start", "eval_acc_final", "mlflow_run_id")
        if k in metrics
    }
