"""Warm starts: a server that has imported torch and MLflow once forks each stage's process.

DVC runs every stage as its own process, and each one used to spend about 6 s importing before any
work (torch ~2 s, MLflow and its SQL store ~4 s): 26 stages, over two minutes of a pipeline on
two cores. Under `dvc repro`, `python -m rlvr.stages ...` (the *client*) instead asks this server
for a process. The server forks a copy of itself, imports done and nothing else, and the copy takes
on the client's working folder, environment, sys.path, umask, standard streams and arguments, then
runs the stage exactly as `python -m` would. Its exit status goes back to the client, which exits
with it; Ctrl-C or DVC's SIGTERM sent to the client is passed on; a client that is killed stops
the stage too (`guard.watch_dvc` watches it).

What the server holds is third-party code only: the forked stage drops every `rlvr` module and
imports this checkout's code afresh, so an edit is never served stale. The server's address hashes
what it did load (interpreter, installed distributions, this file, the environment less DVC's
per-stage variables): change any and the next stage starts a new server. It exits after
`IDLE_SECONDS` with nothing to do. Numbers do not change: the forked process computes what a fresh
one does (same libraries, seeds and thread counts, all set by the stage; no torch work ran before
the fork). Linux only (abstract sockets, fd passing, /proc). With RLVR_WARM=0, on another system,
or outside DVC, a stage runs in its own process as before.

    python -m rlvr.warm <key>     # the server (started by the first client that finds none)
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IDLE_SECONDS = 30.0  # a server with no stage running for this long exits (DVC's gap between stages: ~2 s)
START_WAIT_SECONDS = 10.0  # how long a client waits for a server it started to listen
PRELOAD = (  # what stages import (torch, MLflow's SQLite store, plotting, statistics)
    "numpy", "torch", "torch.nn.functional", "tqdm", "yaml", "ruamel.yaml", "scipy.stats",
    "matplotlib.figure", "matplotlib.backends.backend_agg",
    "mlflow", "mlflow.tracking", "mlflow.entities", "mlflow.store.tracking.sqlalchemy_store",
)
CLIENT_ENV = "RLVR_WARM_CLIENT"  # set in a forked stage: the pid of the client DVC started
_HEADER = struct.Struct("!Q")  # length of the JSON request that follows the streams
MAX_REQUEST = 1 << 24


class WarmError(RuntimeError):
    """The server could not run the stage (it is gone, or refused): the client says so in one line."""


def wanted() -> bool:
    """Whether this stage process should ask for a warm start: on Linux, started by DVC, not
    switched off with RLVR_WARM=0, and not already a forked stage."""
    if sys.platform != "linux" or os.environ.get("RLVR_WARM", "1") == "0" or CLIENT_ENV in os.environ:
        return False
    from rlvr.guard import dvc_ancestor

    return dvc_ancestor() is not None


def _volatile(name: str) -> bool:
    """Environment variables that differ between stages of one `dvc repro` and are read only at run
    time (the forked stage gets the client's): they do not pick the server."""
    return name.startswith(("DVC_", "RLVR_")) or name in ("PWD", "OLDPWD", "SHLVL", "_")


def server_key() -> str:
    """What the server's imports depend on, hashed: two processes with the same key would import
    the same third-party code the same way."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for part in (sys.executable, sys.version, str(os.getuid()), *sys.path[1:],  # sys.path[0]: the checkout
                 (here / "__init__.py").read_text(), (here / "warm.py").read_text()):
        h.update(part.encode() + b"\0")
    for entry in sys.path[1:]:
        if entry.endswith("-packages") and os.path.isdir(entry):  # installed distributions and versions
            h.update("\0".join(sorted(os.listdir(entry))).encode())
    for name in sorted(os.environ):
        if not _volatile(name):
            h.update(f"{name}={os.environ[name]}\0".encode())
    return h.hexdigest()[:32]


def _address(key: str) -> str:
    return f"\0rlvr-warm-{key}"  # Linux abstract socket: no file to clean up, gone with the server


def log_path() -> Path:
    return Path(tempfile.gettempdir()) / f"rlvr-warm-{os.getuid()}.log"


# ------------------------------------------------------------------ client


def _connect(key: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(_address(key))
    except (ConnectionRefusedError, FileNotFoundError):
        sock.close()
        return None
    return sock


def _start_server(key: str) -> None:
    """A detached server (own session, no terminal, output to `log_path()`), not waited for."""
    with open(log_path(), "ab") as log:
        subprocess.Popen([sys.executable, "-m", "rlvr.warm", key], stdin=subprocess.DEVNULL, stdout=log,
                         stderr=log, start_new_session=True, close_fds=True)


def connect(key: str) -> socket.socket:
    """A connection to the server for `key`, started if none listens. Raises WarmError if none
    listens within START_WAIT_SECONDS."""
    sock = _connect(key)
    if sock is not None:
        return sock
    _start_server(key)
    deadline = time.monotonic() + START_WAIT_SECONDS
    while time.monotonic() < deadline:  # it listens before it imports: this wait is short
        time.sleep(0.02)
        sock = _connect(key)
        if sock is not None:
            return sock
    raise WarmError(f"no warm-start server listened within {START_WAIT_SECONDS:.0f} s (see {log_path()})")


def run(module: str, args: list[str]) -> int:
    """`python -m module *args`, run in a process forked by the warm server; returns its exit status.
    Raises WarmError if the server cannot start it (nothing of the stage has run then)."""
    sock = connect(server_key())
    request = json.dumps({"module": module, "argv": args, "cwd": os.getcwd(), "env": dict(os.environ),
                          "path": sys.path, "umask": _umask(), "client": os.getpid()}).encode()
    with sock, sock.makefile("rb") as replies:
        try:
            socket.send_fds(sock, [_HEADER.pack(len(request))], [0, 1, 2])
            sock.sendall(request)
            first = replies.readline()
        except OSError as exc:
            raise WarmError(f"the warm-start server did not take the stage: {exc}") from None
        if not first:
            raise WarmError(f"the warm-start server closed the connection before starting the stage (see {log_path()})")
        child = json.loads(first)["pid"]

        def forward(signum, frame):  # noqa: ARG001
            try:
                os.kill(child, signum)
            except ProcessLookupError:
                pass

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, forward)
        last = replies.readline()  # blocks until the stage exits (signals are forwarded meanwhile)
    if not last:  # the server died: the stage's status is lost; stop it, so nothing runs unwatched
        forward(signal.SIGTERM, None)
        print(f"rlvr: error: the warm-start server stopped while the stage ran (see {log_path()})", file=sys.stderr)
        return 1
    return json.loads(last)["exit"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ------------------------------------------------------------------ server


def _preload() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    import sqlalchemy.orm

    sqlalchemy.orm.configure_mappers()  # MLflow's tables mapped once, in memory (no database opened)


def serve(key: str) -> int:
    """Listen on `key`'s address, import PRELOAD, then fork one stage per request until idle."""
    if key != server_key():  # started from another interpreter or environment than its client's
        print(f"rlvr.warm: key {key} is not this process's ({server_key()}); not serving", file=sys.stderr)
        return 1
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(_address(key))
    except OSError:  # another client started one first: it serves
        return 0
    listener.listen(64)  # clients queue here while the imports run
    _preload()
    import threading

    if threading.active_count() != 1:  # a fork copies only this thread: refuse rather than fork a broken copy
        print(f"rlvr.warm: {threading.active_count()} Python threads after imports; not serving", file=sys.stderr)
        return 1
    os.chdir("/")
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *a: None)  # wakes select when a stage exits
    idle = float(os.environ.get("RLVR_WARM_IDLE", IDLE_SECONDS))  # tests shorten it
    running: dict[int, socket.socket] = {}
    idle_since = time.monotonic()
    while True:
        ready, _, _ = select.select([listener, wake_r], [], [], 1.0)
        if wake_r in ready:
            os.read(wake_r, 4096)
        if listener in ready:
            conn, _ = listener.accept()
            pid = _start_stage(conn, listener, (wake_r, wake_w))
            if pid is not None:
                running[pid] = conn
        _reap(running)
        if running:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since >= idle and listener not in ready:
            return 0


def _reap(running: dict[int, socket.socket]) -> None:
    """Send each finished stage's exit status (128 + signal if killed) to its client."""
    for pid in list(running):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            conn = running.pop(pid)
            try:
                conn.sendall(json.dumps({"exit": code if code >= 0 else 128 - code}).encode() + b"\n")
            except OSError:  # the client is gone
                pass
            conn.close()


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    """A client's request: its three standard streams, then its JSON. Raises ValueError if malformed."""
    conn.settimeout(5.0)  # one silent client must not hold up the others
    header, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
    if len(fds) != 3 or len(header) != _HEADER.size:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"{len(fds)} streams and {len(header)} header bytes received, 3 and {_HEADER.size} expected")
    (size,) = _HEADER.unpack(header)
    if size > MAX_REQUEST:
        raise ValueError(f"a {size}-byte request")
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("client left mid-request")
        data += chunk
    return json.loads(data), fds


def _start_stage(conn: socket.socket, listener: socket.socket, wake: tuple[int, int]) -> int | None:
    """Fork the stage a client asks for; returns its pid (None if the request was refused)."""
    uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
    try:
        if uid != os.getuid():  # an abstract socket is reachable by every user: serve only our own
            raise PermissionError(f"client uid {uid}")
        request, fds = _receive(conn)
    except (OSError, ValueError) as exc:
        print(f"rlvr.warm: request refused: {exc}", file=sys.stderr)
        conn.close()
        return None
    sys.stdout.flush()
    sys.stderr.flush()  # nothing of the server's buffered output may reach the stage's streams
    pid = os.fork()
    if pid == 0:
        try:
            _become_stage(request, fds, [conn.fileno(), listener.fileno(), *wake])
        finally:
            os._exit(70)  # not reached: _become_stage always exits
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:  # the client is gone: its stage notices (guard.watch_dvc) and stops
        pass
    return pid


def _become_stage(request: dict, fds: list[int], server_fds: list[int]) -> None:
    """In the forked child: take on the client's process state, run the module, exit."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for fd in server_fds:
        os.close(fd)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ[CLIENT_ENV] = str(request["client"])
    sys.path[:] = request["path"]
    for name in [m for m in sys.modules if m == "rlvr" or m.startswith("rlvr.")]:
        del sys.modules[name]  # the checkout's code, imported afresh
    sys.stdout.reconfigure(line_buffering=os.isatty(1))
    import random

    random.seed()  # what a new process would have: its own entropy (run names, temp names)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    sys.argv = [request["module"], *request["argv"]]
    os._exit(_run_module(request["module"]))


def _run_module(module: str) -> int:
    """`python -m module`'s behaviour: exit status from SystemExit, traceback and 1 on an error."""
    import atexit
    import runpy
    import traceback

    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException as exc:  # noqa: BLE001  (KeyboardInterrupt too: python prints its traceback)
        traceback.print_exc()
        code = 130 if isinstance(exc, KeyboardInterrupt) else 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    return code


if __name__ == "__main__":
    raise SystemExit(serve(sys.argv[1]))
