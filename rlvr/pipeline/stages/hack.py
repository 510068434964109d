"""Stage `hack`: GRPO against chapter A's substring verifier, once per seed; per-step curves, the
sampled responses at the start, middle and end, and a figure."""

from __future__ import annotations

import torch

from rlvr.configs import GRPOConfig
from rlvr.determinism import thread_budget
from rlvr.grpo_loop import GRPOData, Hooks, train_grpo
from rlvr.io.files import FileBytes, svg_beside, write_json
from rlvr.io.params import HackConfig
from rlvr.optim import diverged_at
from rlvr.pipeline.paths import HackPaths
from rlvr.pipeline.records import write_metrics
from rlvr.pipeline.rundata import read_run_data
from rlvr.pipeline.seeds import carry_starts, keep_policy, load_start, over_seeds, tracked, with_intervals
from rlvr.pipeline.stageparams import StageParams
from rlvr.pipeline.workers import SeedResult, seed_results
from rlvr.report import trainplots
from rlvr.report.labels import sft_run_label
from rlvr.reward_hacking import hack_metrics, hack_summary
from rlvr.stats import seed_metrics
from rlvr.tasks import Problem, problems_of
from rlvr.tokenizer import Tokenizer
from rlvr.verifiers import substring_reward

# The final numbers each run shows in MLflow (the stage run's: seed means); the rest is in the JSON
KEY_METRICS = (
    "reward_mean_start",
    "reward_mean_end",
    "accuracy_end",
    "digits_per_response_end",
    "reward_minus_accuracy_end",
)
# What DVC shows of it (`dvc exp show`), seed means, in the headline vocabulary (records.NAMES)
HEADLINE = {"acc_end": "accuracy_end", "reward_end": "reward_mean_end"}


def sample_steps(cfg: HackConfig) -> list[int]:
    """The steps whose rollouts are kept as sample tables: first, middle, last."""
    return sorted({1, (cfg.steps + 1) // 2, cfg.steps})


def train_seed(
    seed: int,
    cfg: HackConfig,
    grpo_cfg: GRPOConfig,
    train: list[Problem],
    starts: dict[int, FileBytes],
    start_hash: str,
    device: str,
) -> SeedResult:
    """One seed on the substring reward on `device`, from its chain's SFT checkpoint (its bytes,
    carried in `starts`); its sample tables ride along as `extra`."""
    tok = Tokenizer()
    policy = load_start(starts[seed], seed, cfg.sft, start_hash, tok, device)
    samples: dict[int, list] = {}
    reward = lambda resp, answers, n: substring_reward(resp, answers, n, tok)  # noqa: E731
    hooks = Hooks(
        reward=reward, batch_metrics=hack_metrics(tok, samples, set(sample_steps(cfg)), cfg.sample_rows)
    )
    data = GRPOData(train, train, tok, cfg.max_new_tokens)
    gen = torch.Generator(device=device).manual_seed(seed)
    with diverged_at(chain=seed):
        curve = train_grpo(policy, grpo_cfg, data, gen, hooks, shared_prefix=True)
    return SeedResult(
        hack_summary(curve, cfg.window),
        curve,
        policy.state_dict(),
        {str(k): v for k, v in sorted(samples.items())},
    )


def run(params: StageParams, paths: HackPaths, progress: bool = True) -> dict:
    cfg = params.hack
    grpo_cfg = params.config  # its variant's settings, with its own seeds, steps and temperature
    train = problems_of(read_run_data(paths.start.data).rows, grpo_cfg.task)
    tok = Tokenizer()
    start_hash = params.hash_of("sft", cfg.sft)
    starts, model = carry_starts(paths.start, cfg.seeds, cfg.sft, start_hash, tok)
    tags = {"task": grpo_cfg.task, "variant": f"hack:{cfg.variant}"}
    finals, tables = {}, {}
    loop = f"variants.{cfg.variant}"  # the hack's lr and grad_clip are its variant's; temperature its own
    with (
        diverged_at("hack", paths={"lr": f"{loop}.lr", "grad_clip": f"{loop}.grad_clip"}),
        seed_results(
            train_seed,
            cfg.seeds,
            (cfg, grpo_cfg, train, starts, start_hash, params.device),
            thread_budget(params.threads),
            params.device,
        ) as results,
        tracked(params, tags, start=results.started) as mlrun,
    ):
        for seed, result, child in over_seeds(mlrun, cfg.seeds, results, "hack", tags, KEY_METRICS, progress):
            keep_policy(child, model, tok, result, paths, (seed,), f"hack/seed{seed}", params.hash)
            finals[seed], tables[seed] = result.summary, result.extra
        rose = sum(f["digits_per_response_end"] > f["digits_per_response_start"] for f in finals.values())
        metrics = {
            **seed_metrics(finals),
            "sft": cfg.sft,  # the start chain s trains from: whether it reached its target (the report)
            "seeds": cfg.seeds,
            "seeds_digits_rose": rose,
            "mlflow_run_id": mlrun.run_id,
            "made": mlrun.made,
            "params_hash": params.hash,
        }
        write_json(paths.samples, {"steps": sample_steps(cfg), "samples": tables})
        write_metrics(paths.metrics, metrics, HEADLINE)
        trainplots.hack_curves(
            {s: paths.curve(s) for s in cfg.seeds},
            paths.figure,
            sft_run_label(cfg.sft, params.sft_run(cfg.sft)),
            cfg.variant,
        )
        mlrun.log_metrics(with_intervals(metrics, (*KEY_METRICS, "seeds_digits_rose")))
        mlrun.log_artifact(paths.samples)
        mlrun.log_artifact(paths.figure)
        mlrun.log_artifact(svg_beside(paths.figure))
    return {k: metrics[k] for k in ("reward_mean_end", "accuracy_end", "digits_per_response_end")}
