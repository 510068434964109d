"""Process set-up and atomic file output: the two things every stage does first and last.

torch is imported inside the functions that use it: the check, data and report stages never do,
and importing it costs about 2 s a process here.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable


SEED_THREADS = 1  # torch threads per seed in a multi-seed stage, whatever the worker count: a seed's floats never depend on it


def thread_budget(threads: int) -> int:
    """The cores a stage may use: `threads` from params.yaml, or RLVR_THREADS when set (a queue that
    runs several jobs at once gives each its share; see README, "Working as a team"). Single-run
    stages use it as torch's thread count; multi-seed stages as their number of seed workers."""
    env = os.environ.get("RLVR_THREADS")
    if env is None:
        return threads
    if not env.isdigit() or int(env) < 1:
        from rlvr.config import ConfigError

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


def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    """Write through a temp file in the same folder, then rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def write_json(path: str | Path, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_jsonl(path: str | Path, rows: list[dict]) -> Path:
    return write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def read_json(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (run its DVC stage first: dvc repro)")
    return json.loads(path.read_text())


def read_heldout(path: str | Path) -> list[dict]:
    """The held-out problems a data stage wrote (rows of a, b, prompt, answer)."""
    return read_json(path)["problems"]


def read_jsonl(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (run its DVC stage first: dvc repro)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_tsv(path: str | Path, rows: list[dict]) -> Path:
    """Rows -> tab-separated file with a header (what `dvc plots` reads). The columns are every key
    of any row, in first-seen order; a row without one leaves its cell blank."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["\t".join(cols)] + ["\t".join(_fmt(r.get(c, "")) for c in cols) for r in rows]
    return write_text(path, "\n".join(lines) + "\n")


def _fmt(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def read_json_dir(folder: str | Path) -> dict[str, Any]:
    """Every `*.json` in a folder, parsed: {file name: content}."""
    return {p.name: json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))}
