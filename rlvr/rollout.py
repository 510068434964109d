"""Sampling from a policy and checking the samples: the one place prompts are batched, sampled and
scored by exact match. SFT accuracy, GRPO rollouts and evaluation, and pass@k all go through
`sample_scored`, so "correct" means the same thing everywhere.

Prompts and answers are encoded on the CPU and moved to the model's device here; the generator
passed in lives there too (`rlvr.model.sample`), and what comes back (rollouts, correct flags and
counts) is on that device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.model import Rollout, TinyLM, common_prefix_len, grouped_response_logits, sample
from rlvr.tasks import Problem
from rlvr.tokenizer import Tokenizer
from rlvr.verifiers import answer_targets, exact_match


def prompt_tensor(problems: list[Problem], tok: Tokenizer) -> torch.Tensor:
    """The chat-formatted prompts of one batch: P problems -> (P, Tp) token ids."""
    rows = [tok.prompt_ids(p.prompt) for p in problems]
    if len({len(r) for r in rows}) != 1:
        raise ValueError("prompts of one batch must share a length (the sampler keeps no padding)")
    return torch.tensor(rows)  # (P, Tp)


@dataclass(frozen=True)
class Sampling:
    """How a policy's responses are drawn and read: at most `max_new_tokens` tokens each, at
    `temperature` (0: greedy), in `tok`'s tokens: the settings every sampler and scorer below shares."""

    tok: Tokenizer
    max_new_tokens: int
    temperature: float = 1.0


def sample_scored(
    model: TinyLM, problems: list[Problem], n: int, how: Sampling, gen: torch.Generator | None
) -> tuple[Rollout, torch.Tensor]:
    """n samples of each problem and whether each is exactly right: Rollout (P*n rows), correct (P*n,)."""
    tok = how.tok
    prompts = prompt_tensor(problems, tok).to(model.device)  # (P, Tp)
    roll = sample(model, prompts, n, how.max_new_tokens, tok.eos_id, tok.pad_id, how.temperature, gen)
    targets = answer_targets([p.answer for p in problems], tok).to(model.device)  # (P, L)
    return roll, exact_match(roll.response, targets, n, tok.pad_id)  # (P*n,)


def correct_counts(
    model: TinyLM, problems: list[Problem], n: int, how: Sampling, gen: torch.Generator | None
) -> torch.Tensor:
    """Correct samples out of n for each problem: (P,) ints (pass@k's c_i)."""
    _, correct = sample_scored(model, problems, n, how, gen)  # (P*n,)
    return correct.view(len(problems), n).sum(dim=1).long()  # (P,)


def binomial_counts(
    model: TinyLM, problems: list[Problem], n: int, how: Sampling, gen: torch.Generator | None
) -> torch.Tensor:
    """Correct samples out of n per problem, drawn from their exact law: (P,) ints.

    Given the model, n samples of a problem are independent and each is right with the chance
    `solve_probability` computes exactly, so their number of right ones is Binomial(n, p). Drawing
    it from that law is `correct_counts` in distribution, at the cost of one teacher-forced forward
    pass instead of n sampled responses per problem (the wrong ones are never looked at).
    """
    p = solve_probability(model, problems, how).double()  # (P,)
    return torch.binomial(torch.full_like(p, float(n)), p, generator=gen).long()  # (P,)


@dataclass(frozen=True)
class AnswerBatch:
    """Problems with their answers appended, encoded once for `answer_probability`: tokens (P, T)
    prompt + answer digits + <eos>, right-padded; mask (P, T-1) on the positions that predict the
    answer and its <eos>; `shared`, the leading columns every row shares (the system prompt)."""

    tokens: torch.Tensor
    mask: torch.Tensor
    shared: int


def answer_batch(problems: list[Problem], tok: Tokenizer) -> AnswerBatch:
    prompts = [tok.prompt_ids(p.prompt) for p in problems]
    seqs = [q + tok.response_ids(p.answer) for q, p in zip(prompts, problems)]
    T = max(len(s) for s in seqs)
    tokens = torch.full((len(seqs), T), tok.pad_id, dtype=torch.long)
    mask = torch.zeros(len(seqs), T - 1)
    for i, (s, q) in enumerate(zip(seqs, prompts)):
        tokens[i, : len(s)] = torch.tensor(s)
        mask[i, len(q) - 1 : len(s) - 1] = 1.0  # positions that predict the answer and its <eos>
    shared = max(1, min(common_prefix_len(tokens), min(len(q) for q in prompts)))
    return AnswerBatch(tokens, mask, shared)


def answer_probability(
    model: TinyLM, problems: list[Problem] | AnswerBatch, tok: Tokenizer, temperature: float = 1.0
) -> torch.Tensor:
    """The chance that one sample at `temperature` is exactly right, per problem: (P,).

    A sample is right iff its tokens are the answer's digits then <eos> (`exact_match`), so the
    chance is the product of those tokens' probabilities, teacher-forced: one forward pass, and the
    mean over problems is the expected sampled accuracy (pass@1) with no sampling noise at all.
    `problems` may be an `answer_batch` made once, for a measure taken many times.
    """
    batch = problems if isinstance(problems, AnswerBatch) else answer_batch(problems, tok)
    tokens, mask, c = batch.tokens.to(model.device), batch.mask.to(model.device), batch.shared
    with torch.no_grad():  # the shared system prompt is encoded once (the tested fast path)
        logits = grouped_response_logits(model, tokens[:1, :c], tokens[:, c:]).float()  # (P, T-c, V)
        logp = torch.log_softmax(logits / temperature, dim=-1)
        logp = logp.gather(-1, tokens[:, c:].unsqueeze(-1)).squeeze(-1)  # (P, T-c) predicts tokens[:, c:]
    return torch.exp((logp * mask[:, c - 1 :]).sum(dim=1))  # (P,)


def solve_probability(model: TinyLM, problems: list[Problem], how: Sampling) -> torch.Tensor:
    """The chance that one sample, cut at `how.max_new_tokens`, is exactly right, per problem: (P,) on
    the model's device. `answer_probability`, and 0 where the answer and its <eos> do not fit the cap."""
    batch = answer_batch(problems, how.tok)
    fits = batch.mask.sum(dim=1) <= how.max_new_tokens  # (P,) answer digits + <eos> within the cap
    p = answer_probability(model, batch, how.tok, how.temperature)  # (P,)
    return torch.where(fits.to(p.device), p, 0.0)


def accuracy(
    model: TinyLM, problems: list[Problem], n: int, how: Sampling, gen: torch.Generator | None
) -> float:
    """Mean exact-match accuracy of n samples per problem (temperature 0: greedy, n forced to 1)."""
    if not problems:
        return float("nan")
    n = 1 if how.temperature == 0 else n
    _, correct = sample_scored(model, problems, n, how, gen)
    return float(correct.mean())
