"""Stage `sft@{run}`: fit TinyLM on the run's noisy labels, measure greedy and sampled accuracy."""

from __future__ import annotations

import time

import torch

from rlvr import checkpoint
from rlvr.config import Params
from rlvr.model import TinyLM
from rlvr.paths import SFTPaths
from rlvr.pipeline import config_hash
from rlvr.rollout import accuracy, correct_counts
from rlvr.runtime import read_heldout, read_jsonl, set_determinism, thread_budget, write_json, write_tsv
from rlvr.sft import encode_sft, train_sft
from rlvr.stages.common import log_row, run_name, tracked
from rlvr.stats import mean_ci
from rlvr.tasks import problems_of
from rlvr.tokenizer import Tokenizer


def run(params: Params, name: str, paths: SFTPaths, progress: bool = True) -> dict:
    cfg = params.sft_run(name)
    task = params.task(cfg.task)
    rows, held_rows = read_jsonl(paths.data.rows), read_heldout(paths.data.heldout)
    set_determinism(params.seed, thread_budget(params.threads))
    tok = Tokenizer()
    with tracked("sft", name, params, {"task": cfg.task, "seed": params.seed, "sft_run": name}) as mlrun:
        gen = torch.Generator().manual_seed(params.seed)
        model = TinyLM(cfg.model or params.model, len(tok))
        tokens, mask = encode_sft(rows, tok)
        clean = encode_sft(rows, tok, field="answer") if cfg.clean_epochs else None
        t0 = time.perf_counter()
        log = log_row(mlrun)
        curve = train_sft(model, tokens, mask, cfg, gen, progress=progress, clean=clean,
                          on_step=lambda r: log({"step": r["step"], "loss": r["loss"], "lr": r["lr"]}))
        train_seconds = time.perf_counter() - t0

        train_problems = problems_of(rows, cfg.task)
        stride = max(1, len(train_problems) // cfg.eval_max_prompts)
        train_eval = train_problems[::stride][: cfg.eval_max_prompts]
        held = problems_of(held_rows, cfg.task)
        acc = lambda probs, temp: accuracy(model, probs, cfg.eval_samples, task.max_new_tokens, temp,  # noqa: E731
                                           tok, gen)

        def sampled(probs: list) -> tuple[float, list[float]]:
            """Sampled accuracy and its 95% t-interval over problems (what another draw of problems
            from the task would give)."""
            c = correct_counts(model, probs, cfg.eval_samples, task.max_new_tokens, 1.0, tok, gen)  # (P,)
            mean, lo, hi = mean_ci((c.double() / cfg.eval_samples).tolist())
            return mean, [lo, hi]

        greedy_train = acc(train_eval, 0.0)
        sampled_train, sampled_train_ci = sampled(train_eval)
        greedy_held = acc(held, 0.0) if held else None
        sampled_held, sampled_held_ci = sampled(held) if held else (None, None)
        metrics = {
            "final_loss": sum(r["loss"] for r in curve[-10:]) / min(10, len(curve)),
            "steps": len(curve),
            "params": model.num_params(),
            "greedy_acc_train": greedy_train,
            "sampled_acc_train": sampled_train,
            "sampled_acc_train_ci95": sampled_train_ci,
            "greedy_acc_heldout": greedy_held,
            "sampled_acc_heldout": sampled_held,
            "sampled_acc_heldout_ci95": sampled_held_ci,
            "noised_fraction": sum(r["noised"] for r in rows) / len(rows),
            "train_seconds": round(train_seconds, 2),
            "tokens_per_second": round(tokens.numel() * (cfg.clean_epochs + cfg.epochs) / train_seconds),
            "mlflow_run_id": mlrun.run_id,
            "params_hash": config_hash("sft", name, params),
        }
        checkpoint.save(paths.checkpoint, model, tok, run_name("sft", name), metrics["params_hash"])
        write_tsv(paths.curve, curve)
        write_json(paths.metrics, metrics)
        mlrun.log_metrics(metrics)
        mlrun.log_artifact(paths.curve)
    return metrics
