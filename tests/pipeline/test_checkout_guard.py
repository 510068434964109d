"""The session guard (tests/checkout_guard.py): a test that writes the checkout's store, outputs or
dvc.lock fails the session, naming what it changed; reading them, or writing tmp_path, does not."""

import os
import subprocess
import sys
from pathlib import Path

import checkout_guard
from checkout_guard import changes, report, snapshot

TESTS = Path(__file__).resolve().parents[1]  # tests/: the conftest and its guard


def _checkout(root: Path) -> Path:
    """A checkout in miniature: a store, a lock file, a checkpoint and a metrics file."""
    (root / "data/two_digit/sft").mkdir(parents=True)
    (root / "reports/metrics").mkdir(parents=True)
    (root / "mlflow.db").write_bytes(b"sqlite")
    (root / "dvc.lock").write_text("schema: '2.0'\n")
    (root / "data/two_digit/sft/seed0.pt").write_bytes(b"weights")
    (root / "reports/metrics/sft-two_digit.json").write_text("{}")
    (root / "params.yaml").write_text(
        "seed: 0\n"
    )  # not watched: the tests read it, and so may a user edit it
    return root


def test_every_kind_of_change_to_a_watched_path_is_named(tmp_path):
    root = _checkout(tmp_path)
    before = snapshot(root)
    assert "mlflow.db" in before and "data/two_digit/sft/seed0.pt" in before and "params.yaml" not in before
    assert changes(before, snapshot(root)) == []  # reading changes nothing
    (root / "reports/metrics/sft-two_digit.json").write_text('{"loss": 1.0}')  # rewritten
    (root / "data/two_digit/sft/seed1.pt").write_bytes(b"more")  # added
    (root / "mlflow.db").unlink()  # removed
    st = (root / "dvc.lock").stat()
    os.utime(root / "dvc.lock", ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # touched, same size
    (root / "mlartifacts/run1").mkdir(parents=True)  # a store's artifact folder appears, with a run
    (root / "mlartifacts/run1/params.json").write_text("{}")
    (root / "params.yaml").write_text("seed: 1\n")
    found = changes(before, snapshot(root))
    assert "added    data/two_digit/sft/seed1.pt" in found
    assert "added    mlartifacts/" in found and not [
        line for line in found if "run1" in line
    ]  # the folder says it
    assert "removed  mlflow.db" in found
    assert "changed  dvc.lock" in found
    assert "changed  reports/metrics/sft-two_digit.json" in found
    assert "changed  data/two_digit/sft/" in found  # the folder gained an entry
    assert not [line for line in found if "params.yaml" in line]
    head, *paths = report(found, root, limit=2)
    assert str(root) in head and "mlflow_store" in head
    assert paths[:2] == found[:2] and paths[2] == f"... and {len(found) - 2} more"


SUITE_CONFTEST = """
import sys
from pathlib import Path

sys.path.insert(0, {tests!r})
import checkout_guard

checkout_guard.ROOT = Path({root!r})
from checkout_guard import _checkout_unchanged, pytest_sessionfinish, pytest_terminal_summary  # noqa
"""

SUITE_TESTS = """
import os
from pathlib import Path

ROOT = Path({root!r})


def test_reads_and_uses_tmp_path(tmp_path):
    assert (ROOT / "dvc.lock").read_text()
    (tmp_path / "mlflow.db").write_bytes(b"its own store")
    assert "MLFLOW_TRACKING_URI" not in os.environ  # the user's store is not handed to the tests


def test_writes_a_metrics_file_of_the_checkout():
    (ROOT / "reports/metrics/sft-two_digit.json").write_text('{{"loss": 2.0}}')
"""


def _session(suite: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MLFLOW_TRACKING_URI": "sqlite:////nowhere/user.db"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite), *args],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_session_whose_test_writes_the_checkout_fails_naming_the_path(tmp_path):
    """Every test passes, yet the session fails: one of them rewrote a metrics file of the checkout.
    Without that test, the session passes (reading the checkout and writing tmp_path are fine)."""
    root = _checkout(tmp_path / "checkout")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(SUITE_CONFTEST.format(tests=str(TESTS), root=str(root)))
    (suite / "test_suite.py").write_text(SUITE_TESTS.format(root=str(root)))
    clean = _session(suite, "-k", "reads_and_uses_tmp_path")
    assert clean.returncode == 0, clean.stdout[-2000:]
    assert "checkout changed" not in clean.stdout
    dirty = _session(suite)
    assert dirty.returncode == 1, dirty.stdout[-2000:]
    assert "2 passed" in dirty.stdout and "checkout changed" in dirty.stdout
    assert f"the tests changed the checkout's own results in {root} (1 path)" in dirty.stdout
    assert "changed  reports/metrics/sft-two_digit.json" in dirty.stdout


def test_the_guard_watches_this_checkout():
    assert checkout_guard.ROOT == TESTS.parent and (checkout_guard.ROOT / "params.yaml").is_file()
    assert {"mlflow.db", "dvc.lock", "data", "reports"} <= set(checkout_guard.WATCHED)


SLOW_SUITE = """
import os

import pytest


@pytest.mark.slow
def test_logs_a_stage_run_without_the_store_fixture():
    from rlvr.pipeline.tracking import stage_run

    os.chdir({root!r})  # as a stage does: the default store is the working folder's mlflow.db
    with stage_run("worked", {{}}, {{}}, "h"):
        pass


def test_fast_and_harmless(tmp_path):
    (tmp_path / "x").write_text("x")
"""


def test_the_slow_tier_is_watched_and_a_run_logged_to_the_default_store_fails_it(tmp_path):
    """The guard is the session's, whatever tier `-m` picks: a slow test that logs a stage run
    without the `mlflow_store` fixture (as a stage test once did) writes the checkout's mlflow.db,
    and the `-m slow` session fails naming it, though its test passed."""
    root = _checkout(tmp_path / "checkout")
    (root / "mlflow.db").unlink()  # a checkout whose store does not exist yet: the run would make it
    suite = tmp_path / "suite"
    suite.mkdir()
    conftest = SUITE_CONFTEST.format(tests=str(TESTS), root=str(root))
    conftest += '\n\ndef pytest_configure(config):\n    config.addinivalue_line("markers", "slow: slow")\n'
    (suite / "conftest.py").write_text(conftest)
    (suite / "test_suite.py").write_text(SLOW_SUITE.format(root=str(root)))
    slow = _session(suite, "-m", "slow")
    assert slow.returncode == 1, slow.stdout[-2000:]
    assert "1 passed, 1 deselected" in slow.stdout and "checkout changed" in slow.stdout
    assert "added    mlflow.db" in slow.stdout
    fast = _session(suite, "-m", "not slow")
    assert fast.returncode == 0 and "checkout changed" not in fast.stdout, fast.stdout[-2000:]
