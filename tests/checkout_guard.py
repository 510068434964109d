"""The guard that keeps the test suite out of the checkout's own results (wired up in conftest.py).

A test works in tmp_path, with a private MLflow store (the `mlflow_store` fixture): it never writes
the user's tracking store (mlflow.db and its artifacts), the pipeline's outputs (data/, reports/)
or dvc.lock. The guard records what those paths are before the session (a stat of each, and of
everything under the folders: mtimes and sizes, no hashing; a few hundred entries, about a
millisecond) and compares after it: any change fails the session, naming the paths.

conftest.py imports the fixture and the two hooks below; `ROOT` is the checkout watched (a test
of the guard points it at a folder of its own).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The store (the SQLite file, its lock, the artifacts of a store without an artifact root), the
# pipeline's outputs and its lock file.
WATCHED = ("mlflow.db", "mlflow.lock", "mlartifacts", "mlruns", "dvc.lock", "data", "reports")
# What would point a test at the user's store or workspace from outside: cleared for the session
# (a test that needs one sets it, as `mlflow_store` does).
FOREIGN_ENV = ("MLFLOW_TRACKING_URI", "DVC_ROOT", "DVC_STAGE", "DVC_EXP_NAME")


def snapshot(root: Path | None = None, names: tuple[str, ...] = WATCHED) -> dict[str, tuple]:
    """root-relative path -> (mtime_ns, size) of each watched path that exists and of everything
    under a watched folder; a folder's key ends in "/" (its mtime changes when an entry is added
    or removed). Links are not followed."""
    root = ROOT if root is None else root
    out: dict[str, tuple] = {}
    for name in names:
        _record(out, root, root / name)
    return out


def _record(out: dict, root: Path, path: Path) -> None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    rel = path.relative_to(root).as_posix()
    if not stat.S_ISDIR(st.st_mode):
        out[rel] = (st.st_mtime_ns, st.st_size)
        return
    out[rel + "/"] = (st.st_mtime_ns, 0)
    try:
        entries = sorted(e.name for e in os.scandir(path))
    except OSError:
        return
    for name in entries:
        _record(out, root, path / name)


def changes(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """What differs between two snapshots, one line a path: "added", "removed" or "changed". What
    lies under a folder that was added or removed is not listed: the folder says it."""
    added, removed = after.keys() - before.keys(), before.keys() - after.keys()

    def top(paths: set[str]) -> list[str]:
        return sorted(
            p for p in paths if not any(p != d and p.startswith(d) for d in paths if d.endswith("/"))
        )

    lines = [f"added    {p}" for p in top(added)]
    lines += [f"removed  {p}" for p in top(removed)]
    lines += [f"changed  {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return lines


def report(lines: list[str], root: Path | None = None, limit: int = 20) -> list[str]:
    """The session's verdict on `changes(...)`: a heading, the first `limit` paths, the rest counted."""
    root = ROOT if root is None else root
    head = (
        f"the tests changed the checkout's own results in {root} ({len(lines)} path"
        f"{'s' if len(lines) != 1 else ''}): a test must "
        "work in tmp_path with the mlflow_store fixture (or another process, e.g. a dvc repro in "
        "this checkout, wrote them meanwhile)"
    )
    shown = lines[:limit] + ([f"... and {len(lines) - limit} more"] if len(lines) > limit else [])
    return [head, *shown]


# ------------------------------------------------------------------ the pytest side

_BEFORE = pytest.StashKey[dict]()
_CHANGED = pytest.StashKey[list]()


@pytest.fixture(scope="session", autouse=True)
def _checkout_unchanged(request):
    """Record the checkout's store, outputs and lock file before the first test; `pytest_sessionfinish`
    fails the session if any of them changed. For the session, no variable from outside points a
    test at the user's store or workspace (FOREIGN_ENV)."""
    with pytest.MonkeyPatch.context() as mp:
        for name in FOREIGN_ENV:
            mp.delenv(name, raising=False)
        request.config.stash[_BEFORE] = snapshot()
        yield


def pytest_sessionfinish(session, exitstatus):
    """After every test and fixture teardown: compare, and make a passing session fail on a change."""
    before = session.config.stash.get(_BEFORE, None)
    if before is None:  # no test ran
        return
    changed = changes(before, snapshot())
    if changed:
        session.config.stash[_CHANGED] = changed
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    """Name what changed, in the summary (printed after `pytest_sessionfinish`)."""
    changed = terminalreporter.config.stash.get(_CHANGED, None)
    if changed:
        head, *paths = report(changed)
        terminalreporter.write_sep("=", "checkout changed", red=True)
        terminalreporter.write_line(head, red=True)
        for line in paths:
            terminalreporter.write_line(f"  {line}")
