"""`rlvr bench --only passk_model`: one model's pass@k workload on the 300 held-out prompts, as the
`passk` stage does it (counts out of 256 drawn from each problem's exact law, one forward pass), and
beside it the 64 sampled and scored responses a problem it replaced."""

from __future__ import annotations

import time

import torch

from rlvr.bench import fair
from rlvr.bench.targets import TARGETS
from rlvr.io.params import Params
from rlvr.model import TinyLM
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer


def _timed(call, repeats: int) -> list[float]:
    """Seconds of `repeats` calls of call(r) after one warm-up call."""
    times = []
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        call(r)
        if r:
            times.append(time.perf_counter() - t0)
    return times


def bench(params: Params, repeats: int = 3) -> dict:
    """One model's pass@k workload on 300 held-out prompts: the stage's (256 counts a problem from
    their exact law, `binomial_counts`) and, for comparison, 64 sampled and scored responses a
    problem (`correct_counts`, what the stage did before).

    Uses the two_digit SFT checkpoint when `dvc repro` has made it (rows stop at <eos> as in the
    real stage), else an untrained model (every row runs to the cap: the worst case)."""
    from rlvr.pipeline import checkpoint
    from rlvr.pipeline.paths import sft
    from rlvr.rollout import Sampling, binomial_counts, correct_counts

    tok = Tokenizer()
    task = params.task("two_digit")
    _, held = split("two_digit", 300, params.seed)[:2]
    ckpt = sft("two_digit").checkpoint(params.sft_run("two_digit").seeds[0])
    model = checkpoint.load(ckpt, tok) if ckpt.is_file() else TinyLM(params.model, len(tok)).eval()
    n, cap = params.passk.n, task.max_new_tokens
    gen = lambda r: torch.Generator().manual_seed(r)  # noqa: E731
    how = Sampling(tok, cap, 1.0)
    exact = _timed(lambda r: binomial_counts(model, held, n, how, gen(r)), repeats)
    sampled = _timed(lambda r: correct_counts(model, held, 64, how, gen(r)), repeats)
    return {
        "seconds_per_model": fair.spread(exact),
        "samples_per_problem": n,
        "sampled_seconds_per_model": fair.spread(sampled),
        "completions": len(held) * 64,
        "model": str(ckpt) if ckpt.is_file() else "untrained",
        "max_new_tokens": task.max_new_tokens,
        **TARGETS["passk_model"],
    }
