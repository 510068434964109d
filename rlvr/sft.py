"""Noisy SFT: the data that gives RL something to sharpen, and the supervised loop.

The SFT set holds `repeats` copies of every training problem; in each copy the label is replaced,
with probability `noise_rate`, by an answer drawn uniformly from the task's range of sums (it may
by chance be the right one; the row records `noised` either way). A model that fits this mixture
answers correctly about (1 - q) + q / |range| of the time when sampled at T = 1: that is how the
chapters' starting accuracies are reached, by choosing q (the values, and how each was calibrated,
are in params.yaml).
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict

import torch
import torch.nn.functional as F
from tqdm import tqdm

from rlvr.config import ModelConfig, SFTConfig, TaskConfig
from rlvr.model import TinyLM, common_prefix_len, grouped_response_logits, sample
from rlvr.tasks import Problem, answer_range
from rlvr.tokenizer import Tokenizer
from rlvr.verifiers import answer_targets, exact_match


def noisy_rows(problems: list[Problem], noise_rate: float, repeats: int, seed: int) -> list[dict]:
    """`repeats` labelled copies of each problem, labels corrupted with probability `noise_rate`."""
    if not 0.0 <= noise_rate <= 1.0:
        raise ValueError(f"noise_rate = {noise_rate}: must lie in [0, 1]")
    rng = random.Random(f"noise:{seed}")
    rows = []
    for r in range(repeats):
        for p in problems:
            lo, hi = answer_range(p.task)
            noised = rng.random() < noise_rate
            label = str(rng.randint(lo, hi)) if noised else p.answer
            rows.append({"a": p.a, "b": p.b, "prompt": p.prompt, "answer": p.answer, "label": label,
                         "noised": noised, "copy": r})
    return rows


def problem_rows(problems: list[Problem]) -> list[dict]:
    return [{"a": p.a, "b": p.b, "prompt": p.prompt, "answer": p.answer} for p in problems]


def encode_sft(rows: list[dict], tok: Tokenizer, field: str = "label") -> tuple[torch.Tensor, torch.Tensor]:
    """Chat-formatted sequences and their loss mask (1 on the response's tokens and <eos>).

    `field` picks the response: "label" (the noisy label) or "answer" (the true answer).
    Returns tokens (N, T) right-padded, and mask (N, T-1) aligned with next-token targets.
    """
    seqs, starts = [], []
    for r in rows:
        prompt = tok.prompt_ids(r["prompt"])
        seqs.append(prompt + tok.response_ids(r[field]))
        starts.append(len(prompt))
    T = max(len(s) for s in seqs)
    tokens = torch.full((len(seqs), T), tok.pad_id, dtype=torch.long)
    mask = torch.zeros(len(seqs), T - 1)
    for i, (s, start) in enumerate(zip(seqs, starts)):
        tokens[i, : len(s)] = torch.tensor(s)
        mask[i, start - 1 : len(s) - 1] = 1.0  # target positions: response tokens and <eos>
    return tokens, mask


def shared_prefix_len(tokens: torch.Tensor, mask: torch.Tensor) -> int:
    """Leading columns every row shares (the chat template's system part), capped so that every
    loss position keeps its logits: tokens (B, T), mask (B, T-1) -> an int in [1, first target]."""
    first_target = int(mask.any(dim=0).int().argmax())  # first column of mask with a loss token
    return max(1, min(common_prefix_len(tokens), first_target + 1))


def sft_loss(model: TinyLM, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over assistant tokens only. tokens (B, T), mask (B, T-1).

    Every row starts with the same system prompt, whose activations are therefore the same in every
    row: it is encoded once per batch (a prefix shared by all B rows, `grouped_response_logits`) and
    only the rest of each row is run per row. Same loss as `model(tokens[:, :-1])`, to float
    rounding (tested), at about half the cost.
    """
    c = shared_prefix_len(tokens, mask)
    logits = grouped_response_logits(model, tokens[:1, :c], tokens[:, c:])  # (B, T-c, V) predicts tokens[:, c:]
    ce = F.cross_entropy(logits.transpose(1, 2), tokens[:, c:], reduction="none")  # (B, T-c)
    m = mask[:, c - 1 :]  # (B, T-c) targets tokens[:, c:]
    return (ce * m).sum() / m.sum().clamp(min=1.0)


def lr_at(step: int, total: int, peak: float) -> float:
    """Linear warm-up over 5% of steps, then cosine decay to 10% of the peak."""
    warm = max(1, total // 20)
    if step < warm:
        return peak * (step + 1) / warm
    progress = (step - warm) / max(1, total - warm)
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def train_sft(model: TinyLM, tokens: torch.Tensor, mask: torch.Tensor, cfg: SFTConfig,
              generator: torch.Generator, on_step=None, progress: bool = True,
              clean: tuple[torch.Tensor, torch.Tensor] | None = None) -> list[dict]:
    """AdamW over shuffled mini-batches: `cfg.clean_epochs` passes over `clean` (the same rows with
    their true answers), then `cfg.epochs` over the noisy `tokens`; one warm-up + cosine schedule
    spans both. Returns the per-step curve (`phase` says which data each step saw).

    Why a clean warm-up: under heavy label noise the model sits for a long, seed-dependent time on
    the plateau where it ignores the operands; when (and whether) it leaves it within the budget is
    chaotic. Learning the rule first, then fitting the noisy mixture, makes the final accuracy track
    (1 - q) + q / |range| instead of the luck of the plateau.
    """
    if cfg.clean_epochs and clean is None:
        raise ValueError(f"clean_epochs = {cfg.clean_epochs} needs the clean-label tensors (clean=...)")
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    N = tokens.shape[0]
    per_epoch = math.ceil(N / cfg.batch_size)
    phases = [("clean", *clean)] * cfg.clean_epochs if cfg.clean_epochs else []
    phases += [("noisy", tokens, mask)] * cfg.epochs
    total = per_epoch * len(phases)
    curve = []
    model.train()
    bar = tqdm(total=total, desc="sft", unit="step", disable=not progress, mininterval=1.0)
    for epoch, (phase, toks, msk) in enumerate(phases):
        order = torch.randperm(N, generator=generator)  # (N,)
        for i in range(per_epoch):
            step = epoch * per_epoch + i
            idx = order[i * cfg.batch_size : (i + 1) * cfg.batch_size]
            for group in opt.param_groups:
                group["lr"] = lr_at(step, total, cfg.lr)
            loss = sft_loss(model, toks[idx], msk[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            row = {"step": step, "epoch": epoch, "phase": phase, "loss": loss.item(), "lr": opt.param_groups[0]["lr"]}
            curve.append(row)
            if on_step is not None:
                on_step(row)
            bar.update(1)
            bar.set_postfix(loss=f"{row['loss']:.3f}", refresh=False)
    bar.close()
    model.eval()
    return curve


def prompt_tensor(problems: list[Problem], tok: Tokenizer) -> torch.Tensor:
    rows = [tok.prompt_ids(p.prompt) for p in problems]
    if len({len(r) for r in rows}) != 1:
        raise ValueError("prompts of one batch must share a length (the sampler keeps no padding)")
    return torch.tensor(rows)  # (P, Tp)


def accuracy(model: TinyLM, problems: list[Problem], tok: Tokenizer, task: TaskConfig, n: int,
             temperature: float, generator: torch.Generator) -> float:
    """Mean exact-match accuracy of n samples per problem (temperature 0: greedy, n forced to 1)."""
    if not problems:
        return float("nan")
    n = 1 if temperature == 0 else n
    roll = sample(model, prompt_tensor(problems, tok), n, task.max_new_tokens, tok.eos_id, tok.pad_id,
                  temperature=temperature, generator=generator)
    targets = answer_targets([p.answer for p in problems], tok)  # (P, L)
    return float(exact_match(roll.response, targets, n, tok.pad_id).mean())


def checkpoint(model: TinyLM, tok: Tokenizer, **meta) -> dict:
    return {"model": model.state_dict(), "model_config": asdict(model.cfg), "vocab": tok.vocab, **meta}


def load_model(path, tok: Tokenizer | None = None) -> tuple[TinyLM, dict]:
    """Rebuild a TinyLM from a checkpoint; the vocabulary must match the tokenizer's."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    tok = tok or Tokenizer()
    if ckpt["vocab"] != tok.vocab:
        raise ValueError(f"{path}: checkpoint vocabulary differs from the tokenizer's; re-run its sft stage")
    model = TinyLM(ModelConfig(**ckpt["model_config"]), len(tok))
    model.load_state_dict(ckpt["model"])
    model.eval()
    return model, ckpt


# ---------------------------------------------------------------------------------------------
# Stage functions: config + paths in, metrics dict out.

def run_data(params, run: str, out_dir) -> dict:
    """`data@{run}`: the noisy SFT set and the held-out problems of the run's task, as JSONL."""
    from pathlib import Path

    from rlvr.runtime import write_jsonl
    from rlvr.tasks import split

    cfg = params.sft_run(run)
    train, held = split(cfg.task, params.task(cfg.task).heldout, params.seed)
    rows = noisy_rows(train, cfg.noise_rate, cfg.repeats, params.seed)
    out_dir = Path(out_dir)
    write_jsonl(out_dir / "sft.jsonl", rows)
    write_jsonl(out_dir / "heldout.jsonl", problem_rows(held))
    noised = sum(r["noised"] for r in rows)
    return {"rows": len(rows), "train_problems": len(train), "heldout_problems": len(held),
            "noised_fraction": noised / len(rows)}


def problems_of(rows: list[dict], task: str) -> list[Problem]:
    """The distinct problems in JSONL rows, in a fixed order."""
    seen = sorted({(r["a"], r["b"]) for r in rows})
    return [Problem(a, b, task) for a, b in seen]


def run_sft(params, run: str, data_dir, ckpt_path, metrics_path, curve_path, progress: bool = True) -> dict:
    """`sft@{run}`: fit TinyLM on the noisy set, measure greedy and sampled accuracy, save all."""
    import time
    from pathlib import Path

    from rlvr.config import params_hash, to_dict
    from rlvr.runtime import read_jsonl, save_checkpoint, set_determinism, write_json, write_tsv
    from rlvr.tracking import stage_run

    cfg = params.sft_run(run)
    task = params.task(cfg.task)
    data_dir = Path(data_dir)
    rows, held_rows = read_jsonl(data_dir / "sft.jsonl"), read_jsonl(data_dir / "heldout.jsonl")
    stage_params = {"seed": params.seed, "threads": params.threads, "model": to_dict(params.model),
                    "task": to_dict(task), "sft": to_dict(cfg)}
    phash = params_hash(stage_params)
    set_determinism(params.seed, params.threads)
    tok = Tokenizer()
    with stage_run(f"sft@{run}", stage_params, {"task": cfg.task, "seed": params.seed, "sft_run": run},
                   phash) as mlrun:
        gen = torch.Generator().manual_seed(params.seed)
        model = TinyLM(params.model, len(tok))
        tokens, mask = encode_sft(rows, tok)
        clean = encode_sft(rows, tok, field="answer") if cfg.clean_epochs else None
        t0 = time.perf_counter()
        curve = train_sft(model, tokens, mask, cfg, gen, on_step=lambda r: mlrun.log_step(
            r["step"], {"loss": r["loss"], "lr": r["lr"]}), progress=progress, clean=clean)
        train_seconds = time.perf_counter() - t0

        train_problems = problems_of(rows, cfg.task)
        stride = max(1, len(train_problems) // cfg.eval_max_prompts)
        train_eval = train_problems[::stride][: cfg.eval_max_prompts]
        held = problems_of(held_rows, cfg.task)
        acc = lambda probs, temp: accuracy(model, probs, tok, task, cfg.eval_samples, temp, gen)  # noqa: E731
        metrics = {
            "final_loss": sum(r["loss"] for r in curve[-10:]) / min(10, len(curve)),
            "steps": len(curve),
            "params": model.num_params(),
            "greedy_acc_train": acc(train_eval, 0.0),
            "sampled_acc_train": acc(train_eval, 1.0),
            "greedy_acc_heldout": acc(held, 0.0) if held else None,
            "sampled_acc_heldout": acc(held, 1.0) if held else None,
            "noised_fraction": sum(r["noised"] for r in rows) / len(rows),
            "train_seconds": round(train_seconds, 2),
            "tokens_per_second": round(tokens.numel() * (cfg.clean_epochs + cfg.epochs) / train_seconds),
            "mlflow_run_id": mlrun.run_id,
            "params_hash": phash,
        }
        save_checkpoint(ckpt_path, checkpoint(model, tok, sft_run=run, task=cfg.task, metrics=metrics))
        write_tsv(curve_path, curve)
        write_json(metrics_path, metrics)
        mlrun.log_metrics(metrics)
        mlrun.log_artifact(curve_path)
    return metrics
