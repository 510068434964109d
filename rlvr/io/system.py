"""What the machine is and runs: the CPU's name, family and model (`lscpu`), whether a process lives.

Another CPU model rounds floats differently, so every record of a result names the one that made it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path


def cpu_model() -> str:
    """The CPU's name with its family and model (what decides float rounding between machines of
    one name), as `lscpu` reports them; else what `platform` knows (no lscpu: not Linux)."""
    try:
        run = subprocess.run(
            ["lscpu", "-J"], capture_output=True, text=True, timeout=10, env={**os.environ, "LC_ALL": "C"}
        )
        fields = dict(_lscpu_fields(json.loads(run.stdout)["lscpu"]))
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        return platform.processor() or platform.machine()
    name = fields.get("Model name") or platform.processor() or platform.machine()
    family, model = fields.get("CPU family"), fields.get("Model")
    return f"{name} (family {family}, model {model})" if family and model else name


def _lscpu_fields(entries: list[dict]):
    """(field, value) pairs of `lscpu -J`, flat or nested (newer util-linux nests them in `children`)."""
    for e in entries:
        yield e["field"].rstrip(":"), e.get("data")
        yield from _lscpu_fields(e.get("children", []))


def pid_running(pid: int) -> bool:
    """A process with this pid exists (one that exited but is not yet collected by its parent still
    counts: an interactive shell, or the program that started `dvc`, collects it at once)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _proc(pid: int, name: str) -> bytes | None:
    """/proc/<pid>/<name> (Linux's documented process files, `man 5 proc`); None where there is no
    such process, no procfs, or it is another user's."""
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return None


def parent_pid(pid: int) -> int | None:
    """The pid of `pid`'s parent; None where it cannot be read (no such process, not Linux)."""
    stat = _proc(pid, "stat")
    if not stat:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ")" ends it
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def environment(pid: int) -> dict[str, str] | None:
    """The environment `pid` was started with; None where it cannot be read (another user's process,
    one that has exited, not Linux)."""
    raw = _proc(pid, "environ")
    if not raw:
        return None
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def pids() -> list[int]:
    """Every process this machine shows in /proc (empty where there is no procfs)."""
    try:
        return sorted(int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())
    except OSError:
        return []
