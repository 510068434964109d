"""`rlvr bench --only sft`: SFT's training throughput on two_digit at the default batch size."""

from __future__ import annotations

import time

from rlvr.bench import fair
from rlvr.configs import SFTConfig
from rlvr.io.params import Params
from rlvr.model import TinyLM
from rlvr.noise import sft_rows
from rlvr.optim import AdamW
from rlvr.sft import encode_sft, sft_loss_shared_prefix
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer


def bench(params: Params, steps: int = 30) -> dict:
    """Training throughput of SFT on two_digit at the default batch size (tokens per second)."""
    tok = Tokenizer()
    cfg: SFTConfig = params.sft_run("two_digit")
    train, _ = split("two_digit", params.task("two_digit").heldout, params.seed)[:2]
    tokens, mask = encode_sft(sft_rows(train[: cfg.batch_size], cfg.noise, 1, params.seed), tok)
    model = TinyLM(params.model, len(tok))
    opt = AdamW(model.parameters(), lr=cfg.lr)
    times = []
    for s in range(steps + 3):
        t0 = time.perf_counter()
        loss = sft_loss_shared_prefix(model, tokens, mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if s >= 3:
            times.append(time.perf_counter() - t0)
    tps = [tokens.numel() / t for t in times]
    return {
        "step_seconds": fair.spread(times),
        "tokens_per_second": fair.spread(tps),
        "batch_size": cfg.batch_size,
        "tokens_per_step": tokens.numel(),
    }
