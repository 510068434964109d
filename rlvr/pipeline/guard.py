"""What keeps a failing stage from doing harm: checked outputs, no half results, no orphans.

A stage process (`python -m rlvr.pipeline ...`) runs under these guards:
- before any work, every output it declares must be writable (`preflight`), so a read-only or
  misplaced folder fails in one line, not after the checkpoint was replaced;
- if it fails after writing some outputs, it removes all of them (`outputs_or_nothing`): never a
  new checkpoint beside an old metrics file;
- a failed write (disk full, file-size limit) raises an error naming the file instead of killing
  the process by signal (`SIGXFSZ` is ignored, so the write returns EFBIG);
- when the `dvc` process that started it dies (killed, or its terminal closed), the stage stops
  too (`watch_dvc`), so nothing is written behind DVC's back after `dvc` has exited;
- when another `dvc repro` runs a stage in the same workspace, it says so if the two together ask
  for more threads than there are cores (`warn_if_sharing`).
Both learn which `dvc` runs which stage from the processes themselves (Linux's /proc): DVC puts
DVC_ROOT and DVC_STAGE in the environment of every command it runs.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlvr.fields import UserError
from rlvr.io.system import environment, parent_pid, pid_running, pids


class OutputError(UserError):
    """An output the stage could not write (one line naming it)."""


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def preflight(outputs: list[Path]) -> None:
    """Every output path can be written: the nearest existing ancestor of its folder is a folder we
    may write into, and an existing output of the wrong kind (a folder where a file goes) is not in
    the way; and there is room for it (`check_room`). Raises OutputError naming the first that
    cannot."""
    for out in outputs:
        folder = _nearest_existing(out.parent)
        if not folder.is_dir():
            raise OutputError(f"{out}: cannot be written: {folder} is not a folder")
        check_kind(out)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise OutputError(f"{out}: cannot be written: no write permission on {folder}")
        if out.exists() and not os.access(out, os.W_OK):
            raise OutputError(f"{out}: cannot be written: the file is read-only")
    check_room(outputs)


def check_kind(out: Path) -> None:
    """An existing output is of the kind the stage writes: a file where its name has a suffix
    (`metrics.json`, `curves.tsv`, `report.md`), a folder where it has none (`data/grpo/grpo`, the
    checkpoints). The wrong kind (a folder where a metrics file goes) would fail the stage after its
    work, once DVC had removed its other outputs."""
    if out.is_symlink() and not out.exists():
        raise OutputError(
            f"{out}: cannot be written: it is a link to {os.readlink(out)}, which does not exist"
        )
    if not out.exists():
        return
    if out.suffix and out.is_dir():
        raise OutputError(
            f"{out}: cannot be written: it is a folder where the stage writes a file; move it away"
        )
    if not out.suffix and not out.is_dir():
        raise OutputError(
            f"{out}: cannot be written: it is a file where the stage writes a folder; move it away"
        )


HEADROOM = 16 * 2**20  # room for what a stage writes anew (metrics, curves) beside the files it replaces


def _sizes(out: Path) -> list[tuple[Path, int]]:
    """(file, bytes) of every file an output holds now: what the stage writes again, about as large."""
    files = (
        [out] if out.is_file() else sorted(p for p in out.rglob("*") if p.is_file()) if out.is_dir() else []
    )
    return [(f, f.stat().st_size) for f in files]


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def check_room(outputs: list[Path]) -> None:
    """Room for every output: no file it replaces is larger than the file-size limit (`ulimit -f`;
    the stage writes it anew), and each disk they sit on has free the largest of them (written
    beside the old one, then renamed over it) and HEADROOM for the rest. Raises OutputError naming
    the file or output, the numbers and what to do."""
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    largest: dict[int, tuple[int, Path]] = {}  # disk (st_dev) -> (largest file, first output on it)
    for out in outputs:
        sizes = _sizes(out)
        for f, size in sizes:
            if soft != resource.RLIM_INFINITY and size > soft:
                raise OutputError(
                    f"{f}: too large for the file-size limit (ulimit -f) of {soft} bytes (the stage "
                    f"writes it anew: {size} bytes now); raise the limit"
                )
        disk = _nearest_existing(out).stat().st_dev
        biggest = max((size for _, size in sizes), default=0)
        first = largest.get(disk, (0, out))[1]
        largest[disk] = (max(biggest, largest.get(disk, (0, out))[0]), first)
    for biggest, out in largest.values():
        try:
            free = shutil.disk_usage(_nearest_existing(out)).free
        except OSError:
            continue
        if free < biggest + HEADROOM:
            raise OutputError(
                f"{out}: cannot be written: {_mib(free)} free on its disk, the stage needs about "
                f"{_mib(biggest + HEADROOM)} (its largest file, {_mib(biggest)}, and "
                f"{_mib(HEADROOM)} for the rest); free some space"
            )


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


def dvc_pid() -> int | None:
    """The pid of the `dvc` running this stage; None when DVC did not start this process (it sets
    DVC_STAGE and DVC_ROOT for every command it runs; `rlvr sft ...` and the tests have neither), or
    where processes cannot be read (not Linux). DVC runs a stage's command with `$SHELL -c`, which
    either becomes the command or stays between the two: `dvc` is the nearest ancestor that DVC did
    not start (no DVC_STAGE in the environment it started with)."""
    if not os.environ.get("DVC_ROOT") or "DVC_STAGE" not in os.environ:
        return None
    pid = os.getppid()
    for _ in range(3):  # this process <- the shell, if it stayed <- dvc
        env = environment(pid)
        if env is None:
            return None
        if "DVC_STAGE" not in env:
            return pid
        pid = parent_pid(pid)
        if pid is None:
            return None
    return None


def other_repros(root: Path) -> dict[int, str]:
    """pid -> stage of every stage another `dvc repro` runs in `root` now: the processes DVC started
    there (DVC_ROOT is `root`) for a stage other than this one (DVC_STAGE; this stage's own shell
    and seed workers share it), one pid a stage (the shell DVC starts it with, or the stage)."""
    here, mine = os.path.realpath(root), os.environ.get("DVC_STAGE")
    found: dict[str, int] = {}
    for pid in pids():
        env = environment(pid) or {}
        stage = env.get("DVC_STAGE")
        if stage and stage != mine and os.path.realpath(env.get("DVC_ROOT", "")) == here:
            found.setdefault(stage, pid)
    return {pid: stage for stage, pid in found.items()}


def warn_if_sharing(root: Path, threads: int) -> None:
    """One line on stderr when another `dvc repro` runs a stage in this workspace at the same time
    (DVC allows two repros of disjoint stages): on a few cores both then run up to 10x slower."""
    others = other_repros(root)
    if others and threads * (len(others) + 1) > (os.cpu_count() or 1):
        names = "; ".join(f"{stage} (pid {p})" for p, stage in list(others.items())[:3])
        print(
            f"rlvr: warning: another dvc repro runs a stage in {root}: {names}; "
            f"{len(others) + 1} stages x {threads} threads "
            f"on {os.cpu_count()} cores run up to 10x slower: give each RLVR_THREADS=1, or wait",
            file=sys.stderr,
        )


def watch_dvc(interval: float = 1.0) -> int | None:
    """If a `dvc` process started this stage, stop the stage (SIGTERM to itself: the MLflow run is
    marked KILLED and no output is written) within `interval` seconds of that process, or of the
    process that started this one (the shell DVC runs the command with), being gone. Returns dvc's
    pid (None: not started by dvc, nothing to watch)."""
    target = dvc_pid()
    if target is None:
        return None
    parent = os.getppid()

    def watch() -> None:
        while pid_running(target) and os.getppid() == parent:  # once its parent is gone, another adopts it
            time.sleep(interval)
        gone = f"dvc (pid {target})" if not pid_running(target) else f"its parent (pid {parent})"
        print(f"rlvr: {gone} is gone; stopping this stage", file=sys.stderr)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="watch-dvc", daemon=True).start()
    return target
