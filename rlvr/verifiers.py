"""Verifiers: programs that score a response against the known answer.

`exact_match` is the true accuracy, always logged whatever reward trains the policy. It is
vectorised: a response is correct iff its tokens equal the answer's tokens then <eos> (then padding),
so scoring 19,200 samples is one tensor comparison, not 19,200 decodes. Scores are made on the
responses' device.
"""

from __future__ import annotations

import re

import torch

from rlvr.tokenizer import Tokenizer


def answer_targets(answers: list[str], tok: Tokenizer) -> torch.Tensor:
    """Expected responses (answer digits + <eos>), right-padded: list of P strings -> (P, L)."""
    rows = [tok.response_ids(a) for a in answers]
    width = max(len(r) for r in rows)
    return torch.tensor([r + [tok.pad_id] * (width - len(r)) for r in rows])  # (P, L)


def exact_match(response: torch.Tensor, targets: torch.Tensor, n: int, pad_id: int) -> torch.Tensor:
    """1.0 where a sampled response equals its prompt's answer exactly.

    response: (P*n, T) tokens after the prompt, <pad> after <eos>; targets: (P, L). Returns (P*n,).
    """
    width = max(response.shape[1], targets.shape[1])
    resp = torch.nn.functional.pad(response, (0, width - response.shape[1]), value=pad_id)  # (P*n, W)
    want = torch.nn.functional.pad(targets, (0, width - targets.shape[1]), value=pad_id)  # (P, W)
    return (resp == want.repeat_interleave(n, dim=0)).all(dim=1).float()  # (P*n,)


def response_text(response_row: torch.Tensor, tok: Tokenizer) -> str:
    """Decoded response of one row, specials dropped (for logs and sample tables)."""
    return tok.decode(response_row.tolist(), skip_special=True)


def _texts(response: torch.Tensor, tok: Tokenizer) -> list[str]:
    return [response_text(row, tok) for row in response]


def substring_reward(response: torch.Tensor, answers: list[str], n: int, tok: Tokenizer) -> torch.Tensor:
    """The hackable verifier of chapter A's exercise: 1.0 if the answer appears anywhere in the
    response. "3 7 9" is paid for answer 7, so listing many digits beats committing to one.
    response (P*n, T), answers: P strings -> (P*n,)."""
    hits = [float(answers[i // n] in text) for i, text in enumerate(_texts(response, tok))]
    return torch.tensor(hits, device=response.device)


_NUMBER = re.compile(r"\d+")


def final_answer(text: str) -> str | None:
    """The answer a response commits to: its last number (None if it states none)."""
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def final_answer_reward(response: torch.Tensor, answers: list[str], n: int, tok: Tokenizer) -> torch.Tensor:
    """The fix: parse the committed (last) number and compare it exactly. (P*n, T) -> (P*n,)."""
    return torch.tensor(
        [float(final_answer(t) == answers[i // n]) for i, t in enumerate(_texts(response, tok))],
        device=response.device,
    )


def digit_counts(response: torch.Tensor, tok: Tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """Digits per response and distinct digits per response: (B, T) -> (B,), (B,)."""
    digits = torch.tensor(tok.digit_ids, device=response.device)  # (10,)
    hits = response.unsqueeze(-1) == digits  # (B, T, 10)
    return hits.sum(dim=(1, 2)).float(), hits.any(dim=1).sum(dim=1).float()
