"""Seeds and threads: what makes a stage's numbers bit-for-bit repeatable on one machine, and
that machine's name (another CPU rounds differently).

torch is imported inside the functions that use it: the check, data and report stages never do.
"""

from __future__ import annotations

import os
import platform
import random
import sys
from pathlib import Path

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


def set_determinism(seed: int, threads: int) -> None:
    """Seed every RNG and fix the thread count: results are then bit-for-bit repeatable per machine."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    random.seed(seed)
    deterministic_ops()


def deterministic_ops() -> None:
    """`torch.use_deterministic_algorithms(True)` for eager ops. The public call also imports the
    inductor compiler to set its flag, about 2 s per process here; no stage compiles, so the
    compiler's flag is set only if it is already loaded."""
    import torch

    if "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(True)
    else:
        torch._C._set_deterministic_algorithms(True)


def cpu_model() -> str:
    """The CPU's marketing name (/proc/cpuinfo), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
