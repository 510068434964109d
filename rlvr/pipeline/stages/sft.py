"""Stage `sft@{run}`: once per seed (chain), from that chain's warm-up state, fit TinyLM on the run's
labels to its controlled stop (`rlvr.chain.controlled_start`); measure greedy and sampled accuracy.
Chains train side by side in the stage's seed workers, and the metrics file holds every chain's
numbers, their mean and their interval over chains."""

from __future__ import annotations

import time

import torch

from rlvr.chain import controlled_start, start_accuracies
from rlvr.configs import SFTConfig, TaskConfig
from rlvr.determinism import perturbation, thread_budget
from rlvr.io.files import write_tsv
from rlvr.model import TinyLM
from rlvr.optim import diverged_at
from rlvr.pipeline import checkpoint
from rlvr.pipeline.paths import SFTPaths
from rlvr.pipeline.records import write_metrics
from rlvr.pipeline.rundata import read_run_data
from rlvr.pipeline.seeds import SFT_LOGGED, log_policy, over_seeds, run_name, tracked, with_intervals
from rlvr.pipeline.stageparams import StageParams
from rlvr.pipeline.warmups import Warmup, read_states
from rlvr.pipeline.workers import SeedResult, seed_results
from rlvr.rollout import answer_probability
from rlvr.sft import encode_sft, final_loss
from rlvr.stats import seed_metrics
from rlvr.tasks import Problem, problems_of
from rlvr.tokenizer import Tokenizer

# The final numbers each run shows in MLflow (the stage run's: seed means); the rest is in the JSON
KEY_METRICS = (
    "final_loss",
    "start_val",
    "start_steps",
    "greedy_acc_heldout",
    "sampled_acc_heldout",
    "sampled_acc_train",
)
# What DVC shows of it (`dvc exp show`), chain means, in the headline vocabulary (records.NAMES): the
# start's loss and accuracy, held-out where the task has held-out problems (chapter B), else training
HEADLINE = {"loss": "final_loss", "acc_start": ("sampled_acc_heldout", "sampled_acc_train")}


def train_seed(
    seed: int,
    cfg: SFTConfig,
    task: TaskConfig,
    data: tuple,
    warmup: Warmup,
    evals: tuple[list[Problem], list[Problem], list[Problem]],
    device: str,
) -> SeedResult:
    """Chain `seed` on `device`: from its warm-up state, `rlvr.chain.controlled_start` (the run's
    noisy epochs, stopped at the target on the validation problems, drawn again while the cap comes
    first), then its accuracy numbers (`rlvr.chain.start_accuracies`)."""
    tokens, mask = data
    train, held, val = evals
    tok = Tokenizer()
    gen = torch.Generator(device=device)
    model, opt, warm_curve = warmup.resume(seed, cfg, tok, gen)
    t0 = time.perf_counter()
    start = controlled_start(
        seed,
        cfg,
        warmup.model,
        (tokens, mask, warmup.clean),
        val,
        (model, opt, gen, warm_curve),
        warmup.perturbation,
        device,
    )
    train_seconds = time.perf_counter() - t0
    stop, n_noisy = start.stop, start.noisy_steps
    summary = {
        "final_loss": final_loss(start.curve),
        "steps": len(start.curve),
        "start_steps": n_noisy,
        "train_seconds": round(train_seconds, 2),
        "tokens_per_second": round(tokens.shape[1] * cfg.batch_size * max(1, n_noisy) / train_seconds),
        **start_accuracies(start.model, task.max_new_tokens, train, held, start.gen),
    }
    if stop is not None:
        summary.update(start_val=stop.chosen["value"], reached=float(stop.reached), redraws=start.draws)
    else:  # a run fitted to its budget: its validation value where the budget ended
        summary["start_val"] = float(answer_probability(start.model, val, tok).mean())
    checks = stop.checks if stop is not None else []
    return SeedResult(summary, start.curve, start.model.state_dict(), checks)


def run(params: StageParams, name: str, paths: SFTPaths, progress: bool = True) -> dict:
    cfg = params.config  # run `name`'s settings, handed to its chains as they are
    task = params.task(cfg.task)
    data = read_run_data(paths.data)
    rows = data.rows
    tok = Tokenizer()
    train_problems = problems_of(rows, cfg.task)
    stride = max(1, len(train_problems) // cfg.eval_max_prompts)
    # validation: the task's validation split, or (chapter A: no split) its training prompts
    val = problems_of(data.validation, cfg.task) or train_problems
    evals = (train_problems[::stride][: cfg.eval_max_prompts], problems_of(data.heldout, cfg.task), val)
    clean = encode_sft(rows, tok, field="answer")  # (N, T) tokens, (N, T-1) mask: the true answers
    warmup = Warmup(
        read_states(paths.warmup, cfg.seeds),
        run_name("warmup", cfg.warmup),
        params.hash_of("warmup", cfg.warmup),
        checkpoint.answers_digest(clean[0]),
        cfg.model or params.model,
        clean,
        perturbation(),
    )
    warmup.check(name, cfg, tok)  # fail before any training if a chain's is not the one
    tags = {"task": cfg.task, "sft_run": name}
    per_seed = {}
    args = (cfg, task, encode_sft(rows, tok), warmup, evals, params.device)
    with (
        diverged_at(f"sft.{name}"),  # a chain that diverges stops the stage: one line, no outputs
        seed_results(train_seed, cfg.seeds, args, thread_budget(params.threads), params.device) as results,
        tracked(params, tags, start=results.started) as mlrun,
    ):
        model = TinyLM(cfg.model or params.model, len(tok))
        for seed, result, child in over_seeds(
            mlrun,
            cfg.seeds,
            results,
            run_name("sft", name),
            tags,
            KEY_METRICS,
            progress,
            SFT_LOGGED,
        ):
            model.load_state_dict(result.state)
            unit = f"{run_name('sft', name)}/seed{seed}"
            saved = checkpoint.save(paths.checkpoint(seed), model, tok, unit, params.hash)
            log_policy(child, model, saved, unit)
            child.log_artifact(write_tsv(paths.curve(seed), result.curve), "seed")
            if result.extra:  # the validation checks of a controlled start
                child.log_steps({"val_acc": [(r["step"], r["value"]) for r in result.extra]})
                child.log_artifact(write_tsv(paths.checks(seed), result.extra), "seed")
            per_seed[seed] = result.summary
        metrics = {
            "sft_run": name,
            "task": cfg.task,
            "seeds": cfg.seeds,
            "params": model.num_params(),
            "noised_fraction": sum(r["noised"] for r in rows) / len(rows),
            **seed_metrics(per_seed),
            "mlflow_run_id": mlrun.run_id,
            "made": mlrun.made,
            "params_hash": params.hash,
        }
        write_metrics(paths.metrics, metrics, HEADLINE)
        mlrun.log_metrics(with_intervals(metrics, (*KEY_METRICS, "noised_fraction")))
    return {k: metrics.get(k) for k in ("sampled_acc_train", "sampled_acc_heldout", "mlflow_run_id")}
