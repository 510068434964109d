"""What keeps a failing stage from doing harm: checked outputs, no half results, no orphans.

A stage process (`python -m rlvr.pipeline ...`) runs under these guards:
- before any work, every output it declares must be writable (`preflight`), so a read-only or
  misplaced folder fails in one line, not after the checkpoint was replaced;
- if it fails after writing some outputs, it removes all of them (`outputs_or_nothing`): never a
  new checkpoint beside an old metrics file;
- a failed write (disk full, file-size limit) raises an error naming the file instead of killing
  the process by signal (`SIGXFSZ` is ignored, so the write returns EFBIG);
- when the `dvc` process that started it dies (killed, or its terminal closed), the stage stops
  too (`watch_dvc`), so nothing is written behind DVC's back after `dvc` has exited.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlvr.fields import UserError


class OutputError(UserError):
    """An output the stage could not write (one line naming it)."""


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def preflight(outputs: list[Path]) -> None:
    """Every output path can be written: the nearest existing ancestor of its folder is a folder we
    may write into, and an existing output of the wrong kind (a folder where a file goes) is not in
    the way. Raises OutputError naming the first that cannot."""
    for out in outputs:
        folder = _nearest_existing(out.parent)
        if not folder.is_dir():
            raise OutputError(f"{out}: cannot be written: {folder} is not a folder")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise OutputError(f"{out}: cannot be written: no write permission on {folder}")
        if out.exists() and not os.access(out, os.W_OK):
            raise OutputError(f"{out}: cannot be written: the file is read-only")


def _stamp(path: Path) -> tuple:
    """What changes when a stage writes the output (a file's or a folder's files' mtimes and sizes)."""
    if path.is_file():
        st = path.stat()
        return (st.st_mtime_ns, st.st_size)
    if path.is_dir():
        return tuple(sorted((str(p), p.stat().st_mtime_ns) for p in path.rglob("*") if p.is_file()))
    return ()


@contextmanager
def outputs_or_nothing(outputs: list[Path]) -> Iterator[None]:
    """Run a stage; if it fails after changing any of its outputs, remove them all (the stage's
    outputs then say "not made", which `dvc repro` redoes, instead of mixing two runs)."""
    before = {p: _stamp(p) for p in outputs}
    try:
        yield
    except BaseException:
        if any(_stamp(p) != before[p] for p in outputs):
            removed = [str(p) for p in outputs if p.exists()]
            for p in outputs:
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
            if removed:
                print(
                    f"rlvr: the stage failed part-way; removed its outputs: {', '.join(removed)}",
                    file=sys.stderr,
                )
        raise


def ignore_file_size_signal() -> None:
    """A write past `ulimit -f` then fails with EFBIG (an OSError naming the file), not SIGXFSZ."""
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process from /proc, None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid = stat.rsplit(")", 1)[1].split()[:2]  # after "(command name)": state, then ppid
    return state, int(ppid)


def _proc_parent(pid: int) -> int | None:
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def _is_dvc(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    names = [os.path.basename(a.decode(errors="replace")) for a in argv if a]
    return any(n == "dvc" for n in names[:2]) or names[1:3] == ["-m", "dvc"]


def stage_pid() -> int:
    """The pid DVC started for this stage: this process's, or, in a stage forked by the warm-start
    zygote (`warm.py`), its client's (RLVR_STAGE_PID)."""
    return int(os.environ.get("RLVR_STAGE_PID") or os.getpid())


def dvc_ancestor(pid: int | None = None) -> int | None:
    """The nearest ancestor process running `dvc` (through the shell DVC starts commands with), or
    None when the stage was started some other way (`rlvr sft ...`, tests). Linux /proc only."""
    pid = _proc_parent(pid or stage_pid())
    while pid and pid > 1:
        if _is_dvc(pid):
            return pid
        pid = _proc_parent(pid)
    return None


def _stage_of(pid: int) -> str | None:
    """The stage a `python -m rlvr.pipeline <stage> [key]` process runs ("grpo@dapo"), else None."""
    try:
        argv = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        return None
    for i in range(len(argv) - 2):
        if argv[i] == "-m" and argv[i + 1] == "rlvr.pipeline":
            rest = [a for a in argv[i + 2 :] if a and not a.startswith("-")]
            return "@".join(rest[:2]) or None
    return None


def other_stages(root: Path) -> list[tuple[int, str]]:
    """(pid, stage) of every other rlvr stage process working in `root`: not this one, not one of
    its seed workers (forked children run the same command) and not their own workers. Linux only."""
    mine = set()
    for pid in {os.getpid(), stage_pid()}:
        while pid and pid > 1:  # this process (and its warm-start client) and the stages above them
            mine.add(pid)
            pid = _proc_parent(pid)
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        pid = int(entry.name)
        stage = _stage_of(pid)
        if stage is None or _stage_of(_proc_parent(pid) or 0) is not None:  # a worker of a stage
            continue
        try:
            if Path(f"/proc/{pid}/cwd").resolve() != root.resolve():
                continue
        except OSError:
            continue
        found.append((pid, stage))
    return sorted(found)


def warn_if_sharing(root: Path, threads: int) -> None:
    """One line on stderr when another stage trains in this workspace at the same time (two
    `dvc repro` of disjoint stages): on a few cores both then run up to 10x slower."""
    others = other_stages(root)
    if others and threads * (len(others) + 1) > (os.cpu_count() or 1):
        names = ", ".join(f"{s} (pid {p})" for p, s in others[:3])
        print(
            f"rlvr: warning: {names} also running in {root}; {len(others) + 1} stages x {threads} threads "
            f"on {os.cpu_count()} cores run up to 10x slower: give each RLVR_THREADS=1, or wait",
            file=sys.stderr,
        )


def _alive(pid: int) -> bool:
    """Running, not merely a zombie waiting for its parent to collect its exit status."""
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def watch_dvc(interval: float = 1.0) -> int | None:
    """If a `dvc` process started this stage, stop the stage (SIGTERM to itself: the MLflow run is
    marked KILLED and no output is written) within `interval` seconds of that process dying.
    Returns dvc's pid (None: no dvc above this process, nothing to watch)."""
    target = dvc_ancestor()
    if target is None:
        return None

    def watch() -> None:
        while _alive(target):
            time.sleep(interval)
        print(f"rlvr: dvc (pid {target}) is gone; stopping this stage", file=sys.stderr)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="watch-dvc", daemon=True).start()
    return target
