"""The MLflow store a stage logs to: where it is (`tracking_uri`: MLFLOW_TRACKING_URI, or this
checkout's `mlflow.db`), how it is shown and recorded (credentials masked, no machine path), how a
server is asked (credentials as MLflow's client sends them), and whether a stage can use it at all
(`check_store`: it answers, and a SQLite file is a writable file with room to grow), all before any
training starts. `rlvr.pipeline.tracking` logs to it; `rlvr.pipeline.probe` asks it the stages' own
questions.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

from rlvr.fields import UserError
from rlvr.io.files import redact


class TrackingError(UserError):
    """The configured tracking store cannot be used; raised before any training starts. Its message
    never holds a secret of the store's (`rlvr.io.files.redact`), whoever prints it."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


def repo_root() -> Path:
    return Path(os.environ.get("DVC_ROOT") or os.getcwd()).resolve()


def default_tracking_uri() -> str:
    """This checkout's own store: an SQLite file at the repository root."""
    return f"sqlite:///{repo_root() / 'mlflow.db'}"


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri()


def check_reachable(uri: str) -> None:
    """Fail fast, in one line naming the URI, when a tracking server does not answer or a local
    store's folder is missing or not writable (rather than wait on the database driver)."""
    if uri.startswith("sqlite:///"):
        folder = Path(
            uri.removeprefix("sqlite:///")
        ).parent  # sqlite:////abs/x.db -> /abs; sqlite:///rel/x.db -> rel
        if not folder.is_dir():
            raise TrackingError(
                f"MLflow tracking store {uri}: folder {folder} does not exist; create it or "
                f"unset MLFLOW_TRACKING_URI to use this checkout's mlflow.db"
            )
        if os.statvfs(folder).f_flag & os.ST_RDONLY:  # root would pass os.access below
            raise TrackingError(
                f"MLflow tracking store {uri}: folder {folder} is on a read-only file system; remount "
                "it read-write or point MLFLOW_TRACKING_URI at a store you can write"
            )
        if not os.access(folder, os.W_OK | os.X_OK):
            raise TrackingError(f"MLflow tracking store {uri}: folder {folder} is not writable")
    if uri.startswith(("http://", "https://")):
        try:
            bare, headers = server_request(uri)
            request = urllib.request.Request(bare.rstrip("/") + "/health", headers=headers)
            urllib.request.urlopen(request, timeout=5).read()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TrackingError(
                f"MLflow tracking server {public_uri(uri)} is unreachable ({reason}); "
                f"start it or unset MLFLOW_TRACKING_URI to use the local SQLite store"
            ) from None


def _address(parts) -> str:
    """A split URI's host and port, without its credentials (an IPv6 host back in brackets)."""
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return host + (f":{parts.port}" if parts.port else "")


def public_uri(uri: str) -> str:
    """A tracking URI as a record or a message may show it: a server's password masked (`***`)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(uri)
    if parts.password is None and parts.username is None:
        return uri
    user = parts.username + (":***" if parts.password is not None else "")
    return urlunsplit(parts._replace(netloc=f"{user}@{_address(parts)}"))


def recorded_uri(uri: str) -> str:
    """A tracking URI as a committed record keeps it: no password (`public_uri`), and a store inside
    the checkout relative to its root (`sqlite:///mlflow.db`), so no record names this machine's
    folders."""
    uri = public_uri(uri)
    if uri.startswith("sqlite:///"):
        path = Path(uri.removeprefix("sqlite:///"))
        if path.is_absolute() and path.resolve().is_relative_to(repo_root()):
            return f"sqlite:///{path.resolve().relative_to(repo_root()).as_posix()}"
    return uri


def server_request(uri: str) -> tuple[str, dict[str, str]]:
    """A server URI as MLflow's client sends it (its HTTP library reads `user:password@` as Basic
    auth): the URI without the credentials, and the Authorization header they make. MLflow's own
    variables (MLFLOW_TRACKING_TOKEN, then MLFLOW_TRACKING_USERNAME and _PASSWORD) come first."""
    import base64
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(uri)
    bare = urlunsplit(parts._replace(netloc=_address(parts)))
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    user = os.environ.get("MLFLOW_TRACKING_USERNAME")
    password = os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if not (user and password) and parts.username is not None:
        user, password = unquote(parts.username), unquote(parts.password or "")
    if token:
        return bare, {"Authorization": f"Bearer {token}"}
    if user and password:
        pair = base64.b64encode(f"{user}:{password}".encode()).decode()
        return bare, {"Authorization": f"Basic {pair}"}
    return bare, {}


def client_uri(uri: str) -> str:
    """The URI handed to MLflow's client: a server's credentials moved out of it into the variables
    MLflow reads for Basic auth (MLFLOW_TRACKING_USERNAME and _PASSWORD, unless both are set
    already: those come first, as in `server_request`), so that no line MLflow itself prints (its
    "View run ... at:" link after every run) carries the password. Any other URI as it is."""
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or parts.username is None:
        return uri
    if not (os.environ.get("MLFLOW_TRACKING_USERNAME") and os.environ.get("MLFLOW_TRACKING_PASSWORD")):
        os.environ["MLFLOW_TRACKING_USERNAME"] = unquote(parts.username)
        os.environ["MLFLOW_TRACKING_PASSWORD"] = unquote(parts.password or "")
    return urlunsplit(parts._replace(netloc=_address(parts)))


STORE_HEADROOM = 16 * 2**20  # what one stage's runs, params and curves may add to a SQLite store


def check_store(uri: str) -> None:
    """`check_reachable`, and for a local SQLite store what a stage's first write needs: the path is
    a database file or nothing yet (not a folder, not a dangling link), its disk and its file-size
    limit leave room to grow, and a real write succeeds (made in a transaction rolled back, so the
    store is left as it was). Each refusal is one line naming the cause and the fix. No MLflow
    import: the guard stage runs on every `dvc repro`."""
    check_reachable(uri)
    if not uri.startswith("sqlite:///"):
        return
    import resource
    import shutil
    import sqlite3

    db = Path(uri.removeprefix("sqlite:///"))
    store = f"MLflow tracking store {uri}"
    if db.is_symlink() and not db.exists():
        raise TrackingError(
            f"{store}: {db.name} is a link to {os.readlink(db)}, which does not exist; remove the link "
            "(a new store is made) or point MLFLOW_TRACKING_URI at the store"
        )
    if db.exists() and not db.is_file():
        raise TrackingError(
            f"{store}: {db} is a folder, not an SQLite file; move it away or point "
            "MLFLOW_TRACKING_URI at the store"
        )
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    size = db.stat().st_size if db.is_file() else 0
    if soft != resource.RLIM_INFINITY and size + STORE_HEADROOM > soft:
        raise TrackingError(
            f"{store}: the file-size limit (ulimit -f) of {soft} bytes leaves "
            f"{db.name} ({size} bytes) less than {STORE_HEADROOM // 2**20} MiB to grow; raise the limit"
        )
    free = shutil.disk_usage(db.parent).free
    if free < STORE_HEADROOM:
        raise TrackingError(
            f"{store}: {free / 2**20:.1f} MiB free on its disk, a stage needs about "
            f"{STORE_HEADROOM // 2**20} MiB to log; free some space"
        )
    if not db.is_file():
        return  # the first stage that logs makes it
    if not os.access(db, os.R_OK | os.W_OK):
        raise TrackingError(
            f"{store}: {db.name} is read-only; make it writable (chmod u+w {db}) or point "
            "MLFLOW_TRACKING_URI at a store you can write"
        )
    try:
        with sqlite3.connect(db, timeout=30) as con:
            con.execute("BEGIN IMMEDIATE")  # the write lock: fails on a locked file
            con.execute("CREATE TABLE rlvr_guard_probe (x)")  # a real write: fails on a read-only one
            con.execute("ROLLBACK")
    except sqlite3.Error as exc:
        raise TrackingError(f"{store}: {db} cannot be written ({exc})") from None
