"""Verifiers: programs that score a response against the known answer.

`exact_match` is the true accuracy, always logged whatever reward trains the policy. It is
vectorised: a response is correct iff its tokens equal the answer's tokens then <eos> (then padding),
so scoring 19,200 samples is one tensor comparison, not 19,200 decodes.
"""

from __future__ import annotations

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
