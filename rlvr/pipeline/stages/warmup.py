"""Stage `warmup@{name}`: the clean epochs that the SFT runs naming this warm-up share, once per chain.

Its run's rows with their true answers, the first `clean_epochs` of the run's schedule, and for
each seed (chain) the state after them (weights, AdamW moments, the data-order generator, the curve
so far) saved for `sft@{run}` of every run that names it: runs that differ only in their noise
train it once. Seeds train side by side in the stage's seed workers. Its metrics JSON (steps,
final loss per chain, seconds, MLflow run id) links dvc.lock to the MLflow run.
"""

from __future__ import annotations

import time

from rlvr.chain import fresh_start
from rlvr.configs import ModelConfig, SFTConfig
from rlvr.determinism import perturbation, thread_budget
from rlvr.model import TinyLM
from rlvr.optim import diverged_at
from rlvr.pipeline import checkpoint
from rlvr.pipeline.paths import WarmupPaths
from rlvr.pipeline.records import write_metrics
from rlvr.pipeline.rundata import read_run_data
from rlvr.pipeline.seeds import SFT_LOGGED, over_seeds, run_name, tracked, with_intervals
from rlvr.pipeline.stageparams import StageParams
from rlvr.pipeline.workers import SeedResult, seed_results
from rlvr.sft import encode_sft, final_loss
from rlvr.stats import seed_metrics
from rlvr.tokenizer import Tokenizer

KEY_METRICS = ("final_loss",)  # what each run shows in MLflow; the rest is in the metrics JSON


def train_seed(
    seed: int, cfg: SFTConfig, model_cfg: ModelConfig, clean: tuple, eps: float, device: str
) -> SeedResult:
    """Chain `seed`'s clean epochs (`fresh_start` under the chain's seed): the weights as `state`, its
    optimiser and data order as `extra`."""
    t0 = time.perf_counter()
    with diverged_at(chain=seed):
        model, opt, gen, curve = fresh_start(seed, cfg, model_cfg, clean, eps, device)
    summary = {"steps": len(curve), "train_seconds": round(time.perf_counter() - t0, 2)}
    if curve:  # a warm-up of no clean epochs (a run that starts from a fresh model) has no loss
        summary["final_loss"] = final_loss(curve)
    return SeedResult(summary, curve, model.state_dict(), (opt.state_dict(), gen.get_state()))


def run(params: StageParams, name: str, paths: WarmupPaths, progress: bool = True) -> dict:
    w, cfg = params.warmup(name), params.config  # the settings of the SFT run it warms up
    rows = read_run_data(paths.data).rows
    tok = Tokenizer()
    model_cfg = cfg.model or params.model
    clean = encode_sft(rows, tok, field="answer")
    digest = checkpoint.answers_digest(clean[0])
    model = TinyLM(model_cfg, len(tok))
    tags = {"task": cfg.task, "sft_run": w.run}
    per_seed = {}
    eps = perturbation()
    with (
        diverged_at(f"sft.{w.run}"),  # its settings are the run's: one line, no outputs
        seed_results(
            train_seed,
            cfg.seeds,
            (cfg, model_cfg, clean, eps, params.device),
            thread_budget(params.threads),
            params.device,
        ) as results,
        tracked(params, tags, extra={"perturbation": eps} if eps else None, start=results.started) as mlrun,
    ):
        for seed, result, _ in over_seeds(
            mlrun,
            cfg.seeds,
            results,
            run_name("warmup", name),
            tags,
            KEY_METRICS,
            progress,
            SFT_LOGGED,
        ):
            model.load_state_dict(result.state)
            optimizer, generator = result.extra
            checkpoint.save_warmup(
                paths.state(seed),
                model,
                tok,
                f"{run_name('warmup', name)}/seed{seed}",
                params.hash,
                optimizer,
                generator,
                result.curve,
                digest,
            )
            per_seed[seed] = result.summary
        metrics = {
            "sft_run": w.run,
            "seeds": cfg.seeds,
            **({"perturbation": eps} if eps else {}),
            **seed_metrics(per_seed),
            "mlflow_run_id": mlrun.run_id,
            "made": mlrun.made,
            "params_hash": params.hash,
        }
        write_metrics(paths.metrics, metrics)  # no headline: nothing to compare between experiments
        mlrun.log_metrics(with_intervals(metrics, KEY_METRICS))
    return metrics
