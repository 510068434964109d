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
Both learn which `dvc` runs which stage from DVC's own lock on the outputs its stages write.
"""

from __future__ import annotations

import json
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


def _running(pid: int) -> bool:
    """A process with this pid exists (one that exited but is not yet collected by its parent still
    counts: an interactive shell, or the program that started `dvc`, collects it at once)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _dvc_writers(root: Path) -> dict[str, int]:
    """Resolved path -> pid of the `dvc` process holding DVC's write lock on it in `root`. While DVC
    runs a stage's command it holds a write lock on each of the stage's outputs and metrics, naming
    its own pid, in <root>/.dvc/tmp/rwlock; a `dvc` that was killed leaves its entries behind (the
    pids are checked by the callers). Empty when there is no such file or it cannot be read."""
    path = root / ".dvc" / "tmp" / "rwlock"
    for _ in range(5):  # DVC rewrites the file in place when a stage starts or ends: read it again
        try:
            writes = json.loads(path.read_text()).get("write", {})
            return {os.path.realpath(out): int(info["pid"]) for out, info in writes.items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            time.sleep(0.05)
    return {}


def dvc_pid(outputs: list[Path]) -> int | None:
    """The pid of the `dvc` running this stage: the one holding the write lock on its outputs. None
    when DVC did not start this process (it sets DVC_STAGE and DVC_ROOT for every command it runs;
    `rlvr sft ...` and the tests have neither)."""
    root = os.environ.get("DVC_ROOT")
    if not root or "DVC_STAGE" not in os.environ:
        return None
    writers = _dvc_writers(Path(root))
    return next((writers[o] for o in map(os.path.realpath, outputs) if o in writers), None)


def other_repros(root: Path, outputs: list[Path]) -> dict[int, str]:
    """pid -> an output (relative to `root`) of each other running `dvc` that is running a stage in
    `root` now: DVC's write locks there, less those on this stage's outputs (its own dvc's) and those
    left behind by a `dvc` that is gone."""
    mine = {os.path.realpath(o) for o in outputs}
    writers = _dvc_writers(root)
    own = {pid for out, pid in writers.items() if out in mine} | {os.getpid(), os.getppid()}
    found: dict[int, str] = {}
    for out, pid in sorted(writers.items()):
        if pid not in own and pid not in found and _running(pid):
            found[pid] = os.path.relpath(out, os.path.realpath(root))
    return found


def warn_if_sharing(root: Path, threads: int, outputs: list[Path]) -> None:
    """One line on stderr when another `dvc repro` runs a stage in this workspace at the same time
    (DVC allows two repros of disjoint stages): on a few cores both then run up to 10x slower."""
    others = other_repros(root, outputs)
    if others and threads * (len(others) + 1) > (os.cpu_count() or 1):
        names = "; ".join(f"pid {p} writing {out}" for p, out in list(others.items())[:3])
        print(
            f"rlvr: warning: another dvc repro runs a stage in {root} ({names}); "
            f"{len(others) + 1} stages x {threads} threads "
            f"on {os.cpu_count()} cores run up to 10x slower: give each RLVR_THREADS=1, or wait",
            file=sys.stderr,
        )


def watch_dvc(outputs: list[Path], interval: float = 1.0) -> int | None:
    """If a `dvc` process started this stage, stop the stage (SIGTERM to itself: the MLflow run is
    marked KILLED and no output is written) within `interval` seconds of that process, or of the
    process that started this one (the shell DVC runs the command with), being gone. Returns dvc's
    pid (None: not started by dvc, nothing to watch)."""
    target = dvc_pid(outputs)
    if target is None:
        return None
    parent = os.getppid()

    def watch() -> None:
        while _running(target) and os.getppid() == parent:  # once its parent is gone, another adopts it
            time.sleep(interval)
        gone = f"dvc (pid {target})" if not _running(target) else f"its parent (pid {parent})"
        print(f"rlvr: {gone} is gone; stopping this stage", file=sys.stderr)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="watch-dvc", daemon=True).start()
    return target
