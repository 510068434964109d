"""Compiled kernels against eager ones (`rlvr bench --only compiled`), compile time included.

`torch.compile` (inductor, its on-disk cache) wraps the two functions where the sampler and the GRPO
step spend their time: the decode step of one block of rows (`model._decode_block`) and the
shared-prefix forward of the loss (`model.grouped_response_logits`). Each variant runs in a fresh
process (`fair.in_fresh_process`), as a pipeline process would meet it: eager; compiled with an
empty cache (the first process on a machine); compiled with the cache the previous block left (every
later process). Per variant: the first call's seconds (with compiling), the median of the calls
after it, and that median's share of the fp32 GEMM limit. The pipeline runs eager: it compiles
nothing unless these figures say a process gains more than it pays.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

from rlvr.bench import fair
from rlvr.bench.targets import TARGETS
from rlvr.bench.workloads import grpo_step_work, grpo_stepper, sampling_call, sampling_work

RUNS = 20  # timed calls after the first, per block
VARIANTS = ("eager", "compiled, empty cache", "compiled, warm cache")


def _compile() -> None:
    """Swap in compiled versions of the sampler's decode step and the loss's forward."""
    import torch

    from rlvr import grpo_loop as grpo
    from rlvr import model

    model._decode_block = torch.compile(model._decode_block, dynamic=False)
    grpo.grouped_response_logits = torch.compile(model.grouped_response_logits, dynamic=False)


def block(params, workload: str, compiled: bool) -> list[float]:
    """In a fresh process: the seconds of the first call and of RUNS more of `workload` ("grpo_step":
    16 prompts x G 8, 4 tokens, beta 0; "sampling": 300 prompts x 64, 4 tokens)."""
    from rlvr.determinism import set_determinism

    set_determinism(params.seed, params.threads)
    if compiled:
        _compile()
    if workload == "grpo_step":
        call = grpo_stepper(params, params.model, 16, 8, 4, 0.0)
    else:
        call = sampling_call(params)
    out = []
    for _ in range(RUNS + 1):
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return out


def bench_compiled(params, work: dict[str, tuple[float, float]]) -> dict:
    """Eager, then compiled with an empty and with a warm cache, for both workloads. `work`: per
    workload, its FLOPs per call and its GEMM limit (FLOP/s)."""
    out: dict = {}
    for workload, (flops, limit) in work.items():
        with tempfile.TemporaryDirectory(prefix="rlvr-inductor-") as cache:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache  # each workload's own; fresh processes inherit it
            try:
                rows = {}
                for variant in VARIANTS:
                    seconds = fair.in_fresh_process(block, params, workload, variant != "eager")
                    median = statistics.median(seconds[1:])
                    rows[variant] = {
                        "first_call_seconds": round(seconds[0], 3),
                        "median_seconds": round(median, 5),
                        "share_of_gemm_limit": round(flops / median / limit, 3),
                    }
                out[workload] = {**rows, **TARGETS["compiled"][workload]}
            finally:
                del os.environ["TORCHINDUCTOR_CACHE_DIR"]
    out["method"] = (
        "torch.compile (inductor, dynamic=False) on the sampler's decode step and the loss's shared-prefix "
        "forward; every variant in a fresh process: eager, compiled with an empty on-disk cache, compiled "
        f"with the cache the previous process left; the first call (with compiling) and the median of {RUNS} "
        "calls after it."
    )
    return out


def bench(params) -> dict:
    """`rlvr bench --only compiled`: both workloads, with their FLOPs and GEMM limits (`bench.workloads`)."""
    work, limits = sampling_work(params)
    return bench_compiled(
        params, {"grpo_step": grpo_step_work(params), "sampling": (work, max(limits.values()))}
    )
