"""The noisy SFT data: the labels that give RL something to sharpen.

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

import random

import numpy as np

from rlvr.configs import SlipNoise, UniformNoise
from rlvr.tasks import Problem, answer_range


def _row(p: Problem, label: str, noised: bool, copy: int) -> dict:
    return {
        "a": p.a,
        "b": p.b,
        "prompt": p.prompt,
        "answer": p.answer,
        "label": label,
        "noised": noised,
        "copy": copy,
    }


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
    from scipy.stats import beta as beta_dist  # ~0.3 s to import; only slip noise needs it

    facts = [(u, v) for u in range(10) for v in range(10)]
    rates = beta_dist.ppf((np.arange(len(facts), dtype=np.float64) + 0.5) / len(facts), alpha, beta)
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
        return [
            1 - noise.rate + noise.rate / (answer_range(p.task)[1] - answer_range(p.task)[0] + 1)
            for p in problems
        ]
    table = slip_table(noise.alpha, noise.beta, seed)
    return [1 - table[fact(p)][0] for p in problems]
