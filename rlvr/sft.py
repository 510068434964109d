"""Noisy SFT: encoding the labelled rows, the supervised loss and the training loop.

The rows, and the imperfect author whose labels they carry, are `rlvr.noise`'s; how each run was
calibrated is in params.yaml.

Rows are encoded on the CPU; training moves them to the model's device, where the data-order
generator lives too (a CUDA generator on a GPU), so each epoch's shuffle is drawn and applied on
one device and a seed gives one run per device.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from tqdm import tqdm

from rlvr.configs import SFTConfig
from rlvr.controlled import StopAtTarget
from rlvr.model import TinyLM, common_prefix_len, grouped_response_logits
from rlvr.optim import AdamW, check_step, check_weights, diverged_at
from rlvr.tokenizer import Tokenizer


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
    """Mean cross-entropy over assistant tokens only: tokens (B, T), mask (B, T-1) -> a scalar.

    mask[:, i] is 1 where token i+1 is part of the response (its digits and <eos>): the prompt is
    context, never a target.
    """
    logits = model(tokens[:, :-1])  # (B, T-1, V): position i predicts token i+1
    ce = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")  # (B, T-1)
    return (ce * mask).sum() / mask.sum().clamp(min=1.0)


def sft_loss_shared_prefix(model: TinyLM, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`sft_loss` by the fast path the pipeline takes: tokens (B, T), mask (B, T-1) -> a scalar.

    Every row starts with the same system prompt, whose activations are therefore the same in every
    row: it is encoded once per batch (a prefix shared by all B rows, `grouped_response_logits`) and
    only the rest of each row is run per row. Same loss as `sft_loss`, to float rounding (tested),
    at about half the cost.
    """
    c = shared_prefix_len(tokens, mask)
    logits = grouped_response_logits(
        model, tokens[:1, :c], tokens[:, c:]
    )  # (B, T-c, V) predicts tokens[:, c:]
    ce = F.cross_entropy(logits.transpose(1, 2), tokens[:, c:], reduction="none")  # (B, T-c)
    m = mask[:, c - 1 :]  # (B, T-c) targets tokens[:, c:]
    return (ce * m).sum() / m.sum().clamp(min=1.0)


def final_loss(curve: list[dict], last: int = 10) -> float | None:
    """The mean loss of a curve's last `last` steps (None for an empty curve): one step is noisy."""
    tail = [r["loss"] for r in curve[-last:]]
    return sum(tail) / len(tail) if tail else None


def lr_at(step: int, total: int, peak: float, schedule: str = "cosine") -> float:
    """`cosine`: linear warm-up over 5% of steps, then cosine decay to 10% of the peak. `constant`:
    the peak at every step (chapter A's own SFT loop)."""
    if schedule == "constant":
        return peak
    warm = max(1, total // 20)
    if step < warm:
        return peak * (step + 1) / warm
    progress = (step - warm) / max(1, total - warm)
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def train_sft(
    model: TinyLM,
    data: tuple[torch.Tensor, torch.Tensor],
    cfg: SFTConfig,
    generator: torch.Generator,
    *,
    clean: tuple[torch.Tensor, torch.Tensor] | None = None,
    stop: StopAtTarget | None = None,
    **loop,
) -> list[dict]:
    """AdamW over shuffled mini-batches: `cfg.clean_epochs` passes over `clean` (the same rows with
    their true answers), then `cfg.epochs` over the noisy `data` (tokens (N, T), mask (N, T-1)), or
    fewer: `stop`, a controlled start, ends them at its target; one lr schedule spans both. `loop`:
    the options both phases take (`on_step`, `progress`, `shared_prefix`).
    Returns the per-step curve (`phase` says which data each step saw). `generator` lives on the
    model's device; the rows may be anywhere (they are moved there).

    Why a clean warm-up: under heavy label noise the model sits for a long, seed-dependent time on
    the plateau where it ignores the operands; when (and whether) it leaves it within the budget is
    chaotic. Learning the rule first, then fitting the noisy mixture, makes the final accuracy track
    (1 - q) + q / |range| instead of the luck of the plateau.

    The pipeline runs the two phases in two stages (`warm_up`, then `fit_noisy` from the saved
    state), so runs that share their clean epochs train them once; the result is this function's,
    bit for bit (tested).
    """
    if cfg.clean_epochs and clean is None:
        raise ValueError(f"clean_epochs = {cfg.clean_epochs} needs the clean-label tensors (clean=...)")
    opt, curve = warm_up(model, clean if clean is not None else data, cfg, generator, **loop)
    return curve + fit_noisy(model, opt, *data, cfg, generator, **loop, stop=stop)


def warm_up(
    model: TinyLM,
    clean: tuple[torch.Tensor, torch.Tensor],
    cfg: SFTConfig,
    generator: torch.Generator,
    on_step=None,
    progress: bool = True,
    shared_prefix: bool = False,
) -> tuple[AdamW, list[dict]]:
    """The clean phase alone: epochs 0 .. clean_epochs - 1 of the run's schedule, on `clean` (tokens
    (N, T), mask (N, T-1)). Returns the optimiser, whose state `fit_noisy` continues, and the curve."""
    opt = AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    return opt, _epochs(
        model, opt, *clean, "clean", range(cfg.clean_epochs), cfg, generator, on_step, progress, shared_prefix
    )


def fit_noisy(
    model: TinyLM,
    opt: AdamW,
    tokens: torch.Tensor,
    mask: torch.Tensor,
    cfg: SFTConfig,
    generator: torch.Generator,
    on_step=None,
    progress: bool = True,
    shared_prefix: bool = False,
    stop: StopAtTarget | None = None,
) -> list[dict]:
    """The noisy phase: epochs clean_epochs .. clean_epochs + epochs - 1, continuing `warm_up`'s
    optimiser and generator, or fewer: with `stop`, the phase ends at the first check that reaches
    its target (checked before the first step too). Leaves the model in eval mode."""
    first = cfg.clean_epochs
    epochs = range(first, first + cfg.epochs)
    if stop is not None and stop(model, 0):
        model.eval()
        return []
    curve = _epochs(
        model, opt, tokens, mask, "noisy", epochs, cfg, generator, on_step, progress, shared_prefix, stop
    )
    model.eval()
    if stop is not None:
        if not stop.stopped:
            stop.at_cap(model, len(curve))
        curve = curve[: stop.chosen["step"]]  # the steps behind the start's weights
    return curve


def _epochs(
    model: TinyLM,
    opt: AdamW,
    tokens: torch.Tensor,
    mask: torch.Tensor,
    phase: str,
    epochs: range,
    cfg: SFTConfig,
    generator: torch.Generator,
    on_step,
    progress: bool,
    shared_prefix: bool,
    stop: StopAtTarget | None = None,
) -> list[dict]:
    """The given epochs of the run's schedule over tokens (N, T) / mask (N, T-1): one shuffle per epoch
    from `generator`, `ceil(N / batch_size)` steps each, lr from the step's place in the whole run.
    `shared_prefix` takes the loss's fast path (`sft_loss_shared_prefix`). The rows are moved to the
    model's device once; the shuffle is drawn on the generator's (the same one). `stop(model, steps)`
    is asked after every step; True ends the epochs there. A NaN or infinite loss or gradient
    stops training with `Diverged` (a UserError naming the step and the run's lr and grad_clip)
    before the optimiser steps on it, as do NaN or infinite weights after the last step."""
    settings = {"lr": cfg.lr, "grad_clip": cfg.grad_clip}
    loss_fn = sft_loss_shared_prefix if shared_prefix else sft_loss
    tokens, mask = tokens.to(model.device), mask.to(model.device)  # on the CPU: the tensors themselves
    N = tokens.shape[0]
    per_epoch = math.ceil(N / cfg.batch_size)
    total = per_epoch * (cfg.clean_epochs + cfg.epochs)
    curve, done = [], False
    model.train()
    bar = tqdm(
        total=per_epoch * len(epochs),
        desc=f"sft ({phase})",
        unit="step",
        disable=not progress,
        mininterval=1.0,
    )
    for epoch in epochs:
        order = torch.randperm(N, generator=generator, device=generator.device)  # (N,)
        for i in range(per_epoch):
            step = epoch * per_epoch + i
            idx = order[i * cfg.batch_size : (i + 1) * cfg.batch_size]
            opt.lr = lr_at(step, total, cfg.lr, cfg.schedule)
            loss = loss_fn(model, tokens[idx], mask[idx])
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            row = {"step": step, "epoch": epoch, "phase": phase, "loss": loss.item(), "lr": opt.lr}
            check_step(row["loss"], norm, step, settings)  # before the step: never trained on
            with diverged_at(step=step):
                opt.step()
            curve.append(row)
            if on_step is not None:
                on_step(row)
            bar.update(1)
            bar.set_postfix(loss=f"{row['loss']:.3f}", refresh=False)
            done = stop is not None and stop(model, len(curve))
            if done:
                break
        if done:
            break
    bar.close()
    if curve:  # the last step's update has no loss after it to show it
        check_weights(model.parameters(), curve[-1]["step"], settings)
    return curve
