"""`rlvr bench`: speed and memory benchmarks, written to reports/benchmarks.json.

Benchmarks are run on demand, never as timed tests. Each repeats its measurement several times
and reports the median with the min and max, so one noisy run cannot pass for a result.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import time
from pathlib import Path
from typing import Callable

import torch

from rlvr.config import Params, SFTConfig
from rlvr.model import TinyLM, sample
from rlvr.runtime import set_determinism, write_json
from rlvr.sft import encode_sft, noisy_rows, prompt_tensor, sft_loss
from rlvr.tasks import split
from rlvr.tokenizer import Tokenizer


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def bench_sampling(params: Params, repeats: int = 5) -> dict:
    """300 held-out prompts x 64 samples, up to 4 response tokens, default-size model.

    An untrained model rarely emits <eos>, so every row runs the full 4 tokens: the worst case.
    """
    tok = Tokenizer()
    task = params.task("two_digit")
    _, held = split("two_digit", 300, params.seed)
    prompts = prompt_tensor(held, tok)  # (300, Tp)
    model = TinyLM(params.model, len(tok)).eval()
    n = 64
    rates = []
    for r in range(repeats + 1):
        gen = torch.Generator().manual_seed(r)
        t0 = time.perf_counter()
        sample(model, prompts, n, task.max_new_tokens, tok.eos_id, tok.pad_id, 1.0, gen)
        if r:  # the first run warms up allocators and kernels
            rates.append(len(held) * n / (time.perf_counter() - t0))
    return {"completions_per_second": _spread(rates), "completions": len(held) * n,
            "max_new_tokens": task.max_new_tokens, "model_params": model.num_params(),
            "peak_rss_mb": round(_peak_rss_mb(), 1), "target_completions_per_second": 20000,
            "target_peak_rss_mb": 1536}


def bench_sft(params: Params, steps: int = 30) -> dict:
    """Training throughput of SFT on two_digit at the default batch size (tokens per second)."""
    tok = Tokenizer()
    cfg: SFTConfig = params.sft_run("two_digit")
    train, _ = split("two_digit", params.task("two_digit").heldout, params.seed)
    tokens, mask = encode_sft(noisy_rows(train[: cfg.batch_size], cfg.noise_rate, 1, params.seed), tok)
    model = TinyLM(params.model, len(tok))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    times = []
    for s in range(steps + 3):
        t0 = time.perf_counter()
        loss = sft_loss(model, tokens, mask)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if s >= 3:
            times.append(time.perf_counter() - t0)
    tps = [tokens.numel() / t for t in times]
    return {"step_seconds": _spread(times), "tokens_per_second": _spread(tps), "batch_size": cfg.batch_size,
            "tokens_per_step": tokens.numel()}


BENCHMARKS: dict[str, Callable[[Params], dict]] = {"sampling": bench_sampling, "sft": bench_sft}


def run_bench(params: Params, out: Path, only: list[str] | None = None) -> dict:
    """Run the named benchmarks (default all) and merge their figures into `out`."""
    names = only or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        from rlvr.config import ConfigError

        raise ConfigError(f"bench {unknown[0]!r}: unknown; known benchmarks: {', '.join(BENCHMARKS)}")
    set_determinism(params.seed, params.threads)
    results = json.loads(out.read_text()) if out.is_file() else {}
    for name in names:
        results[name] = BENCHMARKS[name](params)
    results["machine"] = {"cpu_count": os.cpu_count(), "threads": params.threads, "torch": torch.__version__,
                          "python": platform.python_version(), "processor": platform.processor() or platform.machine()}
    write_json(out, results)
    return {name: results[name] for name in names}
