"""Sampling from a policy and checking the samples: the one place prompts are batched, sampled and
scored by exact match. SFT accuracy, GRPO rollouts and evaluation, and pass@k all go through
`sample_scored`, so "correct" means the same thing everywhere.

Prompts and answers are encoded on the CPU and moved to the model's device here; the generator
passed in lives there too (`rlvr.model.sample`), and what comes back (rollouts, correct flags and
counts) is on that device.
"""

from __future__ import annotations

import torch

from rlvr.model import Rollout, TinyLM, sample
from rlvr.tasks import Problem
from rlvr.tokenizer import Tokenizer
from rlvr.verifiers import answer_targets, exact_match


def prompt_tensor(problems: list[Problem], tok: Tokenizer) -> torch.Tensor:
    """The chat-formatted prompts of one batch: P problems -> (P, Tp) token ids."""
    rows = [tok.prompt_ids(p.prompt) for p in problems]
    if len({len(r) for r in rows}) != 1:
        raise ValueError("prompts of one batch must share a length (the sampler keeps no padding)")
    return torch.tensor(rows)  # (P, Tp)


def sample_scored(
    model: TinyLM,
    problems: list[Problem],
    n: int,
    max_new_tokens: int,
    temperature: float,
    tok: Tokenizer,
    gen: torch.Generator | None,
) -> tuple[Rollout, torch.Tensor]:
    """n samples of each problem and whether each is exactly right: Rollout (P*n rows), correct (P*n,)."""
    prompts = prompt_tensor(problems, tok).to(model.device)  # (P, Tp)
    roll = sample(model, prompts, n, max_new_tokens, tok.eos_id, tok.pad_id, temperature, gen)
    targets = answer_targets([p.answer for p in problems], tok).to(model.device)  # (P, L)
    return roll, exact_match(roll.response, targets, n, tok.pad_id)  # (P*n,)


def correct_counts(
    model: TinyLM,
    problems: list[Problem],
    n: int,
    max_new_tokens: int,
    temperature: float,
    tok: Tokenizer,
    gen: torch.Generator | None,
) -> torch.Tensor:
    """Correct samples out of n for each problem: (P,) ints (pass@k's c_i)."""
    _, correct = sample_scored(model, problems, n, max_new_tokens, temperature, tok, gen)  # (P*n,)
    return correct.view(len(problems), n).sum(dim=1).long()  # (P,)


def accuracy(
    model: TinyLM,
    problems: list[Problem],
    n: int,
    max_new_tokens: int,
    temperature: float,
    tok: Tokenizer,
    gen: torch.Generator | None,
) -> float:
    """Mean exact-match accuracy of n samples per problem (temperature 0: greedy, n forced to 1)."""
    if not problems:
        return float("nan")
    n = 1 if temperature == 0 else n
    _, correct = sample_scored(model, problems, n, max_new_tokens, temperature, tok, gen)
    return float(correct.mean())
