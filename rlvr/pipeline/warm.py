"""Warm starts: under `dvc repro`, stage processes are forked from one that has already imported
torch and MLflow, instead of each importing them again.

DVC runs every stage as its own process (`python -m rlvr.pipeline <stage>`), and each spent about
2.5 s importing torch and MLflow before its first line of work: a sixth of the whole pipeline. So
the first stage process of a `dvc repro` starts a *zygote* (`python -m rlvr.pipeline.warm`): it
imports torch and MLflow once and waits on a Unix socket. Every stage process is then a thin
client: it hands the zygote its arguments, working folder, environment, umask and standard
streams (their file descriptors); the zygote forks a child that runs the stage exactly as the
process would have (`rlvr.pipeline.run.main`), and the client relays signals to it and leaves with
its exit status. What the child computes cannot differ from a cold start's: the same code, read
afresh from the checkout (the zygote holds no rlvr module), under the same environment.

The zygote belongs to one `dvc` process (its pid is in the socket's name, as are the interpreter,
its import path and the resource limits) and leaves when that process does, or after IDLE_SECONDS
without a stage. A stage whose client dies (SIGKILL) is stopped like one whose dvc died (SIGTERM).
Linux only (abstract sockets, peer credentials, /proc); elsewhere, outside DVC, or with
RLVR_WARM=0, a stage runs cold as before.
"""

from __future__ import annotations

import array
import hashlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time

IDLE_SECONDS = 30.0  # the zygote leaves after this long without a stage running or asked for
CONNECT_SECONDS = 20.0  # how long a client waits for a zygote to listen
REPLY_SECONDS = 60.0  # and then for it to have forked the stage (it may still be importing)
STREAMS = (0, 1, 2)  # stdin, stdout, stderr: the child's are the client's own
STAGE_PID = "RLVR_STAGE_PID"  # set in the child: the pid DVC sees (the client's), for the guards
IMPORTS = ("torch", "mlflow", "mlflow.tracking")  # what the zygote loads once for every stage


class WarmStartError(RuntimeError):
    """The zygote could not be reached or failed to start a stage (one line)."""


def enabled() -> bool:
    """Warm starts apply to stage processes under `dvc` on Linux, unless RLVR_WARM=0."""
    from rlvr.pipeline.guard import dvc_ancestor

    return (
        sys.platform.startswith("linux")
        and os.environ.get("RLVR_WARM", "1") != "0"
        and dvc_ancestor() is not None
    )


def address(dvc_pid: int) -> str:
    """The zygote's abstract socket name for this `dvc` process, interpreter, import path and limits
    (a client under another `ulimit`, or another Python, gets a zygote of its own)."""
    names = ("RLIMIT_FSIZE", "RLIMIT_AS", "RLIMIT_NOFILE")
    limits = [resource.getrlimit(getattr(resource, n)) for n in names]
    key = json.dumps([os.getuid(), dvc_pid, sys.executable, sys.path, limits])
    return "\0rlvr-warm-" + hashlib.sha256(key.encode()).hexdigest()[:24]


# --- the client: a stage process under dvc ---------------------------------------------------------


def run_warm(argv: list[str]) -> int | None:
    """Run the stage `argv` in a child of this dvc's zygote (starting the zygote if there is none),
    relay SIGINT / SIGTERM / SIGHUP to it, and return its exit status. None, after one warning line,
    when no zygote could take the stage: the caller then runs it cold."""
    from rlvr.pipeline.guard import dvc_ancestor

    dvc_pid = dvc_ancestor()
    request = {
        "argv": argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ, **{STAGE_PID: str(os.getpid())}),
        "umask": _umask(),
    }
    conn = replies = None
    try:
        conn = connect(address(dvc_pid), dvc_pid)
        conn.settimeout(REPLY_SECONDS)  # a zygote stuck in its imports must not hang the stage
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], list(STREAMS))
        replies = conn.makefile("r")
        child = int(json.loads(replies.readline())["pid"])
        conn.settimeout(None)  # the stage itself may take as long as it takes
    except (OSError, ValueError, KeyError, WarmStartError) as exc:
        for end in (replies, conn):  # closed: a zygote that answers later sees it and forks nothing
            if end is not None:
                end.close()
        print(f"rlvr: warning: no warm start ({exc or type(exc).__name__}); running cold", file=sys.stderr)
        return None
    relay = lambda signum, _frame: _signal(child, signum)  # noqa: E731
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, relay)
    line = replies.readline()
    if not line:  # the zygote died under the stage: stop the stage, do not run it twice
        _signal(child, signal.SIGTERM)
        print(f"rlvr: error: the warm-start zygote ended while the stage (pid {child}) ran", file=sys.stderr)
        return 1
    code = int(json.loads(line)["exit"])
    return 128 - code if code < 0 else code  # killed by signal N: exit status 128 + N, as a shell says


def prestart() -> None:
    """Start this dvc's zygote if none runs, without waiting for it (the guard stage, first in every
    `dvc repro`, does this so that the zygote imports while DVC moves on)."""
    from rlvr.pipeline.guard import dvc_ancestor

    dvc_pid = dvc_ancestor()
    name = address(dvc_pid)
    conn = _try_connect(name)
    if conn is None:
        _spawn(name, dvc_pid)
    else:
        conn.close()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def connect(name: str, dvc_pid: int) -> socket.socket:
    """A connection to the zygote at `name`, started first if none listens there."""
    conn = _try_connect(name)
    if conn is not None:
        return conn
    _spawn(name, dvc_pid)
    deadline = time.monotonic() + CONNECT_SECONDS
    while time.monotonic() < deadline:
        conn = _try_connect(name)
        if conn is not None:
            return conn
        time.sleep(0.02)
    raise WarmStartError(f"no zygote answered within {CONNECT_SECONDS:.0f} s")


def _spawn(name: str, dvc_pid: int) -> None:
    subprocess.Popen(
        [sys.executable, "-m", "rlvr.pipeline.warm", name[1:], str(dvc_pid)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # not in dvc's process group: a Ctrl-C reaches stages through clients
    )


def _try_connect(name: str) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(name)
    except (ConnectionRefusedError, FileNotFoundError):
        conn.close()
        return None
    return conn


# --- the zygote ------------------------------------------------------------------------------------


def serve(name: str, dvc_pid: int) -> None:
    """Listen at `name` (bound before importing, so a second zygote cannot start), import torch and
    MLflow, then fork one child per stage asked for, until `dvc_pid` is gone or IDLE_SECONDS pass
    with nothing running."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind("\0" + name)
    except OSError:  # another zygote of this dvc got there first
        return
    server.listen(16)
    import importlib

    for module in IMPORTS:
        importlib.import_module(module)
    running: set[int] = set()
    last_active = time.monotonic()
    server.settimeout(0.5)
    while _alive(dvc_pid) and time.monotonic() - last_active < IDLE_SECONDS:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            if running:
                last_active = time.monotonic()  # idle counts from the last stage's end
            continue
        if _peer_uid(conn) != os.getuid():  # an abstract socket is visible to every user
            conn.close()
            continue
        last_active = time.monotonic()
        pid = _fork_stage(server, conn)
        if pid is not None:
            running.add(pid)
            threading.Thread(target=_report_exit, args=(pid, conn, running), daemon=True).start()
    server.close()


def _alive(pid: int) -> bool:
    """Running, not a zombie (/proc; the zygote imports no rlvr module, so not guard's own)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, array.array("i", [0, 0, 0]).itemsize * 3)
    return array.array("i", creds)[1]  # struct ucred: pid, uid, gid


def _fork_stage(server: socket.socket, conn: socket.socket) -> int | None:
    """Read one request and fork its child; None if the request was broken."""
    try:
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, len(STREAMS))
        request = json.loads(msg)
    except (OSError, ValueError):
        conn.close()
        return None
    if _client_gone(conn):  # it gave up waiting (REPLY_SECONDS) and runs the stage cold itself
        conn.close()
        return None
    pid = os.fork()
    if pid == 0:
        server.close()
        os._exit(_child(conn, fds, request))
    for fd in fds:
        os.close(fd)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    return pid


def _client_gone(conn: socket.socket) -> bool:
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:  # connected, nothing to read: the client waits
        return False
    except OSError:
        return True


def _report_exit(pid: int, conn: socket.socket, running: set[int]) -> None:
    _, status = os.waitpid(pid, 0)
    try:
        conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    except OSError:  # the client is gone
        pass
    conn.close()
    running.discard(pid)


def _child(conn: socket.socket, fds: list[int], request: dict) -> int:
    """In the forked child: become the stage process the client would have been, and run it."""
    for fd, target in zip(fds, STREAMS, strict=True):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the zygote's own session ignores nothing
    for name in [m for m in sys.modules if m == "rlvr" or m.startswith("rlvr.")]:
        del sys.modules[name]  # the stage reads rlvr's code from the checkout, as a cold start does
    threading.Thread(target=_stop_when_client_dies, args=(conn,), daemon=True).start()
    from rlvr.pipeline.__main__ import run_and_exit

    sys.argv = ["python -m rlvr.pipeline", *request["argv"]]
    run_and_exit(request["argv"])  # leaves the process
    return 1


def _stop_when_client_dies(conn: socket.socket) -> None:
    """The client never writes after its request: end of stream means it died (SIGKILL). Stop the
    stage as DVC would (SIGTERM: runs marked KILLED, partial outputs removed)."""
    try:
        while conn.recv(1):
            pass
    except OSError:
        pass
    print(f"rlvr: the stage's process (pid {os.environ.get(STAGE_PID)}) is gone; stopping", file=sys.stderr)
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
    os._exit(0)
