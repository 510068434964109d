"""Warm starts (`rlvr.warm`): a stage forked from the server behaves as `python -m` would.

One private server (its own key, via an environment variable no other test sets) serves every
probe below; a probe is a tiny module on the client's sys.path that reports what it sees."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from conftest import ROOT
from rlvr import warm

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="warm starts are Linux only")

PROBE = textwrap.dedent("""
    import json, os, sys, time
    stale = sorted(m for m in sys.modules if m == "rlvr" or m.startswith("rlvr."))
    from rlvr import guard
    watched = guard.watch_dvc(0.2)
    print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(), "argv": sys.argv[1:],
                      "token": os.environ.get("WARM_TEST_TOKEN"), "stale": stale, "watched": watched,
                      "stdin": sys.stdin.readline().strip() if "read" in sys.argv else None,
                      "umask": oct(os.umask(0o22))}), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    if "sleep" in sys.argv:
        time.sleep(30)
        open("late.txt", "w").write("written after the client died")
    raise SystemExit(int(sys.argv[1]))
""")

CLIENT = "import sys; from rlvr import warm; raise SystemExit(warm.run('warm_probe', sys.argv[1:]))"


@pytest.fixture(scope="module")
def probe_env(tmp_path_factory):
    """An environment whose key is this module's alone, with the probe importable."""
    d = tmp_path_factory.mktemp("warm")
    (d / "warm_probe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": f"{d}{os.pathsep}{ROOT}", "WARM_TEST_TOKEN": uuid.uuid4().hex,
           "RLVR_WARM_IDLE": "5"}
    env.pop(warm.CLIENT_ENV, None)
    return d, env


def client(env, cwd, *args, stdin=None, **kw):
    return subprocess.Popen([sys.executable, "-c", CLIENT, *args], cwd=cwd, env=env, stdin=stdin or subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_a_forked_stage_takes_the_clients_streams_folder_args_and_status(probe_env, tmp_path):
    d, env = probe_env
    p = client(env, tmp_path, "3", "read", stdin=subprocess.PIPE, umask=0o027)
    out, err = p.communicate("hello from stdin\n", timeout=120)
    assert p.returncode == 3, err
    seen = json.loads(out)
    assert seen["ppid"] != p.pid  # forked by the server, not started by the client
    assert seen["cwd"] == str(tmp_path) and seen["argv"] == ["3", "read"] and seen["stdin"] == "hello from stdin"
    assert seen["token"] == env["WARM_TEST_TOKEN"] and seen["umask"] == oct(0o027)
    assert seen["stale"] == []  # no rlvr module survives from the server: the checkout's code is imported afresh
    assert seen["watched"] == p.pid  # no dvc above it: it watches its client
    assert "to stderr" in err


def test_signals_to_the_client_reach_the_stage(probe_env, tmp_path):
    d, env = probe_env
    p = client(env, tmp_path, "0", "sleep")
    json.loads(p.stdout.readline())
    p.send_signal(signal.SIGTERM)  # how DVC stops a stage
    assert p.wait(timeout=10) == 128 + signal.SIGTERM
    assert not (tmp_path / "late.txt").exists()


def test_a_killed_client_stops_its_stage(probe_env, tmp_path):
    d, env = probe_env
    p = client(env, tmp_path, "0", "sleep")
    stage = json.loads(p.stdout.readline())["pid"]
    p.kill()  # SIGKILL: nothing can forward it
    p.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{stage}"):
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{stage}")  # stopped (and reaped by the server) within seconds
    assert not (tmp_path / "late.txt").exists()


def test_a_bad_request_is_refused_and_the_server_keeps_serving(probe_env, tmp_path):
    d, env = probe_env
    key = subprocess.run([sys.executable, "-c", "from rlvr import warm; print(warm.server_key())"], env=env,
                         capture_output=True, text=True, check=True).stdout.strip()
    warm_up = client(env, tmp_path, "0")
    warm_up.communicate(timeout=120)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(f"\0rlvr-warm-{key}")
        s.sendall(b"not a request")  # no streams attached
        try:
            reply = s.recv(100)
        except ConnectionResetError:  # closed with our bytes unread
            reply = b""
        assert reply == b""  # closed without starting anything
    p = client(env, tmp_path, "0")
    p.communicate(timeout=60)
    assert p.returncode == 0


def test_the_server_exits_when_idle(probe_env, tmp_path):
    d, env = probe_env
    env = {**env, "WARM_TEST_TOKEN": uuid.uuid4().hex, "RLVR_WARM_IDLE": "1"}  # a server of its own
    p = client(env, tmp_path, "0")
    out, _ = p.communicate(timeout=120)
    server = json.loads(out)["ppid"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and os.path.exists(f"/proc/{server}"):
        time.sleep(0.2)
    assert not os.path.exists(f"/proc/{server}")


def test_the_key_follows_the_environment_but_not_dvcs_per_stage_variables(monkeypatch):
    key = warm.server_key()
    monkeypatch.setenv("DVC_STAGE", "sft@x")
    monkeypatch.setenv("RLVR_THREADS", "1")
    assert warm.server_key() == key
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # read when torch loads: another server
    assert warm.server_key() != key


def test_warm_starts_only_under_dvc_and_not_when_switched_off(monkeypatch):
    assert not warm.wanted()  # pytest was not started by dvc
    monkeypatch.setattr("rlvr.guard.dvc_ancestor", lambda pid=None: 1234)
    assert warm.wanted()
    monkeypatch.setenv("RLVR_WARM", "0")
    assert not warm.wanted()
    monkeypatch.delenv("RLVR_WARM")
    monkeypatch.setenv(warm.CLIENT_ENV, "99")  # already a forked stage
    assert not warm.wanted()


def test_a_server_from_another_environment_does_not_serve(tmp_path):
    """Started with a key that is not its own (another interpreter or environment), it refuses."""
    out = subprocess.run([sys.executable, "-m", "rlvr.warm", "0" * 32], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1 and "not serving" in out.stderr


def test_a_stage_stops_when_the_dvc_above_its_client_dies(probe_env, tmp_path):
    """DVC starts the client through a shell; the stage (the server's child, not DVC's) finds DVC above
    its client and stops within seconds of DVC being killed."""
    d, env = probe_env
    fake_dvc = tmp_path / "bin" / "dvc"
    fake_dvc.parent.mkdir()
    fake_dvc.write_text(textwrap.dedent(f"""
        import subprocess, sys, time
        subprocess.Popen(["/bin/sh", "-c", {f"{sys.executable} -c {CLIENT!r} 0 sleep"!r}])
        time.sleep(60)
    """))
    parent = subprocess.Popen([sys.executable, str(fake_dvc)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    seen = json.loads(parent.stdout.readline())
    assert seen["watched"] == parent.pid  # DVC, found above the client
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{seen['pid']}"):
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{seen['pid']}") and not (tmp_path / "late.txt").exists()


def test_guard_watches_the_variable_the_server_sets():
    """guard keeps its own copy of the name (importing rlvr.warm would make it every stage's code dep)."""
    from rlvr import guard

    assert guard.WARM_CLIENT_ENV == warm.CLIENT_ENV
