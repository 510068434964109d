"""`rlvr bench --only passk_model`: one model's pass@k workload, 300 held-out prompts x 64 samples,
sampled and scored as the `passk` stage does."""

from __future__ import annotations

import time

import torch

from bench import fair
from bench.targets import TARGETS
from rlvr.model import TinyLM
from rlvr.pipeline.config import Params
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer


def bench(params: Params, repeats: int = 3) -> dict:
    """One model's pass@k workload: 300 held-out prompts x 64 samples, sampled and scored.

    Uses the two_digit SFT checkpoint when `dvc repro` has made it (rows stop at <eos> as in the
    real stage), else an untrained model (every row runs to the cap: the worst case)."""
    from rlvr.pipeline import checkpoint
    from rlvr.pipeline.paths import sft
    from rlvr.rollout import correct_counts

    tok = Tokenizer()
    task = params.task("two_digit")
    _, held = split("two_digit", 300, params.seed)[:2]
    ckpt = sft("two_digit").checkpoint(params.sft_run("two_digit").seeds[0])
    model = checkpoint.load(ckpt, tok) if ckpt.is_file() else TinyLM(params.model, len(tok)).eval()
    times = []
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        correct_counts(model, held, 64, task.max_new_tokens, 1.0, tok, torch.Generator().manual_seed(r))
        if r:
            times.append(time.perf_counter() - t0)
    return {
        "seconds_per_model": fair.spread(times),
        "completions": len(held) * 64,
        "model": str(ckpt) if ckpt.is_file() else "untrained",
        "max_new_tokens": task.max_new_tokens,
        **TARGETS["passk_model"],
    }
