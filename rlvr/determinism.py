"""Seeds, threads and the device: what makes a stage's numbers bit-for-bit repeatable on one
machine, and that machine's name (another CPU rounds differently).

torch is imported inside the functions that use it: the check, data and report stages never do
(with `device: cuda`, `check_device` imports it to find the GPU).
"""

from __future__ import annotations

import os
import random
import sys

from rlvr.fields import ConfigError

# torch threads per seed in a multi-seed stage, whatever the worker count: a seed's floats never depend on it
SEED_THREADS = 1


def thread_budget(threads: int) -> int:
    """The cores a stage may use: `threads` from params.yaml, or RLVR_THREADS when set (a queue that
    runs several jobs at once gives each its share; see docs/team.md). Single-run
    stages use it as torch's thread count; multi-seed stages as their number of seed workers."""
    env = os.environ.get("RLVR_THREADS")
    if env is None:
        return threads
    if not env.isdigit() or int(env) < 1:
        raise ConfigError(f"RLVR_THREADS = {env!r}: must be a whole number >= 1")
    return int(env)


PERTURB = "RLVR_PERTURB"  # environment: relative size of a perturbation of every chain's initial weights


def perturbation() -> float:
    """RLVR_PERTURB as a number (0 when unset): `rlvr verify --rerun --perturb` sets it to rerun the
    pipeline as another CPU would, with every chain's start drawn anew by rounding-sized changes."""
    raw = os.environ.get(PERTURB, "0")
    try:
        eps = float(raw)
    except ValueError:
        eps = -1.0
    if not 0 <= eps < 1e-2:
        raise ConfigError(f"{PERTURB} = {raw!r}: must be a number in [0, 0.01) (e.g. 1e-6; unset for none)")
    return eps


def set_determinism(seed: int, threads: int) -> None:
    """Seed every RNG and fix the thread count: results are then bit-for-bit repeatable per machine."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    random.seed(seed)
    deterministic_ops()


def check_device(device: str) -> None:
    """Refuse `device: cuda` where torch sees no CUDA device, in one line, before any work (`rlvr
    check`, every stage, `rlvr starts`). torch is imported only for cuda: on the default cpu the
    check, data and report stages still never load it."""
    if device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            "device = 'cuda': no CUDA device is visible (torch.cuda.is_available() is False); "
            "set device: cpu in params.yaml"
        )


def deterministic_ops() -> None:
    """`torch.use_deterministic_algorithms(True)` for eager ops. Since pytorch/pytorch#165950 the
    public call also imports the inductor compiler to set its flag (about 2.5 s per process here,
    a stage or a seed worker each); no stage compiles, so the compiler's flag is set only if it is
    already loaded. What is missing upstream is a public switch for eager ops alone; until torch has
    one (no upstream issue asks for it yet), the eager flag is set through `torch._C`, the setter the
    public call itself uses, and `tests/pipeline/test_determinism_and_files.py` checks that torch then
    reports deterministic mode on.

    Deterministic mode also fills every new uninitialised tensor with NaN, so that code reading
    memory it never wrote shows NaN instead of stale numbers. No code here does (the sampler and
    the losses write every element before reading it; tests/pipeline/test_determinism_and_files.py
    compares tokens, losses and weights with the fill on and off): the fill is switched off, which
    was 13% of the sampler's profiled time and about 5% of a GRPO step's, and changes no number.

    On a GPU, deterministic cuBLAS needs a fixed workspace, or torch refuses every matrix product:
    CUBLAS_WORKSPACE_CONFIG is set here, before the process's first CUDA product (the CPU never
    reads it)."""
    import torch
    import torch.utils.deterministic

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

    if "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(True)
    else:
        torch._C._set_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = False
