"""Noisy SFT: the data that gives RL something to sharpen, and the supervised loop.

The SFT set holds `repeats` copies of every training problem, each labelled by an imperfect author.
Two models of that author (`sft.<run>.noise.kind`):

- uniform: with probability q a label is replaced by an answer drawn uniformly from the task's range
  of sums (it may by chance be the right one; the row records `noised` either way). A model that
  fits this mixture answers every problem correctly about (1 - q) + q / |range| of the time.
- slips: the author slips on some addition facts. Each units-digit fact u + v has its own slip rate
  s_uv ~ Beta(alpha, beta) and its own wrong digit, both drawn once; a slip writes that wrong digit
  as the answer's last digit (the carry is still right). A problem is then as hard as its units fact:
  a model that learns the facts solves a held-out problem about 1 - s_uv of the time, so solve rates
  spread over [0, 1], and problems whose fact the author almost always gets wrong are almost never
  solved, even in 64 tries. Chapter B's SFT policy has that spread (pass@1 0.53, pass@64 0.983 with
  5 of 300 problems never solved); uniform noise cannot give it (every problem sits near 1 - q).
The parameters, and how each run was calibrated, are in params.yaml.
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F
from tqdm import tqdm

from rlvr.config import SFTConfig, SlipNoise, UniformNoise
from rlvr.model import TinyLM, common_prefix_len, grouped_response_logits
from rlvr.tasks import Problem, answer_range
from rlvr.tokenizer import Tokenizer


def _row(p: Problem, label: str, noised: bool, copy: int) -> dict:
    return {"a": p.a, "b": p.b, "prompt": p.prompt, "answer": p.answer, "label": label, "noised": noised,
            "copy": copy}


def noisy_rows(problems: list[Problem], noise_rate: float, repeats: int, seed: int) -> list[dict]:
    """Uniform noise: `repeats` labelled copies of each problem, each label replaced with probability
    `noise_rate` by a uniformly drawn sum."""
    if not 0.0 <= noise_rate <= 1.0:
        raise ValueError(f"noise_rate = {noise_rate}: must lie in [0, 1]")
    rng = random.Random(f"noise:{seed}")
    rows = []
    for r in range(repeats):
        for p in problems:
            lo, hi = answer_range(p.task)
            noised = rng.random() < noise_rate
            rows.append(_row(p, str(rng.randint(lo, hi)) if noised else p.answer, noised, r))
    return rows


def fact(p: Problem) -> tuple[int, int]:
    """The units-digit addition fact a problem needs: 37+48 needs 7 + 8."""
    return p.a % 10, p.b % 10


def slip_table(alpha: float, beta: float, seed: int) -> dict[tuple[int, int], tuple[float, int]]:
    """The author's slips: for each of the 100 units facts (u, v), its slip rate and the wrong units
    digit it writes (never the right one). The rates are the Beta(alpha, beta) quantiles at
    (i + 0.5) / 100, dealt to the facts in a seeded random order: their spread is the distribution's
    own, not the luck of 100 draws."""
    from scipy.stats import beta as beta_dist  # ~0.3 s to import; only the data stage needs it

    facts = [(u, v) for u in range(10) for v in range(10)]
    rates = beta_dist.ppf((torch.arange(len(facts), dtype=torch.float64) + 0.5).numpy() / len(facts), alpha, beta)
    rng = random.Random(f"slips:{seed}")
    rng.shuffle(facts)
    return {f: (float(rate), ((f[0] + f[1]) % 10 + rng.randint(1, 9)) % 10) for f, rate in zip(facts, rates)}


def slip_rows(problems: list[Problem], alpha: float, beta: float, repeats: int, seed: int) -> list[dict]:
    """Slip noise: `repeats` labelled copies of each problem; with its fact's slip rate a label's last
    digit is the author's wrong digit for that fact."""
    table = slip_table(alpha, beta, seed)
    rng = random.Random(f"noise:{seed}")
    rows = []
    for r in range(repeats):
        for p in problems:
            rate, wrong = table[fact(p)]
            noised = rng.random() < rate
            rows.append(_row(p, p.answer[:-1] + str(wrong) if noised else p.answer, noised, r))
    return rows


def sft_rows(problems: list[Problem], noise: UniformNoise | SlipNoise, repeats: int, seed: int) -> list[dict]:
    """The SFT rows of a run, under its noise model."""
    if noise.kind == "uniform":
        return noisy_rows(problems, noise.rate, repeats, seed)
    return slip_rows(problems, noise.alpha, noise.beta, repeats, seed)


def author_solve_rates(problems: list[Problem], noise: UniformNoise | SlipNoise, seed: int) -> list[float]:
    """How often the labels' author is right on each problem: the solve rate a policy that fitted the
    labels exactly would have (uniform: 1 - q + q / |range|; slips: 1 - s of the problem's fact)."""
    if noise.kind == "uniform":
        return [1 - noise.rate + noise.rate / (answer_range(p.task)[1] - answer_range(p.task)[0] + 1)
                for p in problems]
    table = slip_table(noise.alpha, noise.beta, seed)
    return [1 - table[fact(p)][0] for p in problems]


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
