"""Stage `sft@{run}`: from its warm-up's state, fit TinyLM on the run's noisy labels; measure greedy
and sampled accuracy."""

from __future__ import annotations

import time

import torch

from rlvr import checkpoint
from rlvr.config import Params, SFTConfig, UserError
from rlvr.optim import AdamW
from rlvr.paths import SFTPaths
from rlvr.pipeline import config_hash
from rlvr.rollout import accuracy, correct_counts
from rlvr.runtime import read_heldout, read_jsonl, set_determinism, thread_budget, write_json, write_tsv
from rlvr.sft import encode_sft, final_loss, fit_noisy
from rlvr.stages.common import SFT_LOGGED, log_row, run_name, tracked
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
        gen = torch.Generator()
        model, opt, warm_curve = start_from_warmup(params, name, cfg, paths, rows, tok, gen)
        tokens, mask = encode_sft(rows, tok)
        t0 = time.perf_counter()
        log = log_row(mlrun, SFT_LOGGED)
        for row in warm_curve:  # the run's curve starts with its warm-up's steps
            log(row)
        curve = warm_curve + fit_noisy(model, opt, tokens, mask, cfg, gen, on_step=log, progress=progress)
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
            "final_loss": final_loss(curve),
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
            "tokens_per_second": round(tokens.numel() * cfg.epochs / train_seconds),  # this stage's (noisy) epochs
            "mlflow_run_id": mlrun.run_id,
            "params_hash": config_hash("sft", name, params),
        }
        checkpoint.save(paths.checkpoint, model, tok, run_name("sft", name), metrics["params_hash"])
        write_tsv(paths.curve, curve)
        write_json(paths.metrics, metrics)
        mlrun.log_metrics(metrics)
        mlrun.log_artifact(paths.curve)
    return metrics


def start_from_warmup(params: Params, name: str, cfg: SFTConfig, paths: SFTPaths, rows: list[dict], tok: Tokenizer,
                      gen: torch.Generator) -> tuple:
    """The model, optimiser and data-order generator (set in place) where run `name`'s warm-up left
    them, and the warm-up's curve. A warm-up trained on other true answers is refused."""
    state = checkpoint.load_warmup(paths.warmup, tok, run_name("warmup", cfg.warmup),
                                   config_hash("warmup", cfg.warmup, params))
    clean = encode_sft(rows, tok, field="answer")[0]  # (N, T)
    if checkpoint.answers_digest(clean) != state.answers:
        raise UserError(f"sft.{name}: its rows' true answers differ from those warm-up {cfg.warmup!r} trained on; "
                        f"give sft.{name} a warm-up of its own (warmups: {{{name}: {{run: {name}}}}}, "
                        f"sft.{name}.warmup: {name})")
    opt = AdamW(state.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    opt.load_state_dict(state.optimizer)
    gen.set_state(state.generator)
    return state.model, opt, state.curve
