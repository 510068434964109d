"""Warm starts (rlvr/pipeline/warm.py): a stage forked from the zygote is the stage the client would
have run (its streams, folder, environment, exit status), the zygote belongs to one dvc process and
leaves with it, and a stage whose client dies stops."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rlvr.pipeline import warm
from tests.conftest import ROOT, tiny_raw

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm starts are Linux only")

CLIENT = """
import sys
from rlvr.pipeline import guard, warm
guard.dvc_ancestor = lambda pid=None: int(sys.argv[1])  # as if under that dvc
code = warm.run_warm(sys.argv[2:])
print("client exit", code, flush=True)
sys.exit(0 if code is None else code)
"""


def _zygotes(dvc_pid: int) -> list[int]:
    """Pids of the zygotes serving `dvc_pid` (their command line names it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"rlvr.pipeline.warm" in argv and argv[-2:-1] == [str(dvc_pid).encode()]:
                found.append(int(entry.name))
    return found


@pytest.fixture
def fake_dvc():
    """A process standing in for `dvc`: the zygote lives as long as it does."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc.pid
    proc.kill()
    proc.wait()


def _client(dvc_pid: int, argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CLIENT, str(dvc_pid), *argv],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_forked_stage_has_the_clients_folder_environment_streams_and_exit_status(tmp_path, fake_dvc):
    """The check stage, run through the zygote from a folder holding tiny params: RLVR_THREADS=0 (the
    client's environment, not the zygote's) is refused in one line on the client's stderr, exit 2."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_raw(), sort_keys=False))
    bad = _client(fake_dvc, ["check"], tmp_path, RLVR_THREADS="0")
    assert "RLVR_THREADS = '0': must be a whole number >= 1" in bad.stderr
    assert bad.stdout.strip().endswith("client exit 2"), bad.stdout + bad.stderr
    assert "no warm start" not in bad.stderr
    zygote = _zygotes(fake_dvc)
    assert len(zygote) == 1
    missing = _client(fake_dvc, ["check", "--params", "nowhere.yaml"], tmp_path)
    assert "nowhere.yaml" in missing.stderr and missing.stdout.strip().endswith("client exit 2")
    assert _zygotes(fake_dvc) == zygote  # the second stage went to the same zygote


def test_the_zygote_leaves_with_its_dvc(tmp_path):
    dvc = subprocess.Popen(["sleep", "120"])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_raw(), sort_keys=False))
    _client(dvc.pid, ["check"], tmp_path)
    assert len(_zygotes(dvc.pid)) == 1
    dvc.kill()
    dvc.wait()
    deadline = time.monotonic() + 10
    while _zygotes(dvc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _zygotes(dvc.pid) == []


def test_a_zygote_that_never_answers_means_a_cold_start_with_a_warning(tmp_path, fake_dvc, monkeypatch):
    monkeypatch.setattr(warm, "CONNECT_SECONDS", 0.2)
    monkeypatch.setattr(warm, "_spawn", lambda name, pid: None)  # nothing starts
    monkeypatch.setattr("rlvr.pipeline.guard.dvc_ancestor", lambda pid=None: fake_dvc)
    assert warm.run_warm(["check"]) is None


def test_a_zygote_that_accepts_but_never_forks_means_a_cold_start(fake_dvc, monkeypatch, capsys):
    """A zygote stuck (in its imports, say) takes the connection and never answers: the client
    gives up after REPLY_SECONDS and the stage runs cold, with one warning line."""
    import socket
    import threading

    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.bind(warm.address(fake_dvc))
    stuck.listen(1)
    threading.Thread(target=lambda: (stuck.accept(), time.sleep(30)), daemon=True).start()
    monkeypatch.setattr(warm, "REPLY_SECONDS", 0.5)
    monkeypatch.setattr("rlvr.pipeline.guard.dvc_ancestor", lambda pid=None: fake_dvc)
    try:
        assert warm.run_warm(["check"]) is None
    finally:
        stuck.close()
    assert "no warm start" in capsys.readouterr().err


def test_warm_starts_only_under_dvc_and_not_when_turned_off(monkeypatch):
    monkeypatch.setattr("rlvr.pipeline.guard.dvc_ancestor", lambda pid=None: None)
    assert not warm.enabled()  # `rlvr sft`, tests: cold as before
    monkeypatch.setattr("rlvr.pipeline.guard.dvc_ancestor", lambda pid=None: 1234)
    assert warm.enabled()
    monkeypatch.setenv("RLVR_WARM", "0")
    assert not warm.enabled()


def test_a_zygote_belongs_to_one_dvc_and_one_set_of_limits():
    import resource

    assert warm.address(100) != warm.address(101)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    before = warm.address(100)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096 * 1024, hard))
    try:
        assert warm.address(100) != before  # `ulimit -f` then `dvc repro`: a zygote of its own
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


STAND_IN = """

import time as _time


def main(argv=None):  # the test's stand-in for a stage: a minute's work, stoppable by Ctrl-C
    try:
        print("stage pid", os.getpid(), flush=True)
        _time.sleep(60)
    except KeyboardInterrupt:
        print("stage interrupted", flush=True)
        return 130
    return 0
"""


@pytest.fixture
def long_stage(tmp_path, fake_dvc):
    """A client under `fake_dvc` whose stage (a copy of rlvr with STAND_IN as the stage's main) is
    running: (client process, the forked stage's pid)."""
    code = tmp_path / "code"
    shutil.copytree(ROOT / "rlvr", code / "rlvr", ignore=shutil.ignore_patterns("__pycache__"))
    run_py = code / "rlvr" / "pipeline" / "run.py"
    run_py.write_text(run_py.read_text() + STAND_IN)
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(fake_dvc), "check"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(code)},
        stdout=subprocess.PIPE,
        text=True,
    )
    stage = int(client.stdout.readline().split()[-1])  # the checkout's code ran, in another process
    assert stage != client.pid
    yield client, stage
    client.kill()
    client.wait()


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def test_ctrl_c_reaches_a_forked_stage_through_its_client(long_stage):
    client, stage = long_stage
    client.send_signal(signal.SIGINT)
    out = client.stdout.read()
    assert client.wait(timeout=20) == 130
    assert "stage interrupted" in out and "client exit 130" in out
    assert _gone(stage)


def test_a_stage_whose_client_is_killed_stops(long_stage):
    """SIGKILL the client (DVC's stage process; nothing can relay): the forked stage stops too."""
    client, stage = long_stage
    client.send_signal(signal.SIGKILL)
    client.wait()
    assert _gone(stage)
