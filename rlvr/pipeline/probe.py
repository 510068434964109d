"""The guard's questions to a tracking store: the ones the stages will ask, asked before DVC may
remove any stage's outputs.

A server that answers `/health` can still fail every MLflow call (a broken backend database, a
proxy in front of the wrong service); a SQLite file can open and lock yet not be an MLflow store. So
the guard does what a stage does, on a small scale, and names the first call that fails:
- a server (REST API 2.0): find experiment `rlvr-repro` (made when missing, as a stage makes it),
  search its runs (a stage looks for runs left RUNNING), create a probe run, log to it, write a
  small artifact to it with MLflow's own client (`probe_artifact`), end it, and delete it;
- a SQLite file: the tables a stage reads exist at the installed MLflow's schema revision, and a
  search of the runs answers.
MLflow is imported for a server's artifact only: the guard runs on every `dvc repro`, and MLflow
takes ~1.5 s to import.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import closing
from pathlib import Path

from rlvr.pipeline.store import TrackingError, check_store, client_uri, public_uri, server_request
from rlvr.pipeline.tracking import EXPERIMENT, KIND, KIND_TAG

PROBE_NAME = "rlvr-guard-probe"


def probe_store(uri: str) -> None:
    """`check_store` (the store answers, and a SQLite file takes a write), then the stages' own
    questions (`probe_server`, `probe_sqlite`). Says so in one line when it finds a write that was
    cut short (a hot journal, which SQLite rolls back as the store is opened)."""
    db = Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None
    journal = None if db is None else Path(f"{db}-journal")
    hot = journal is not None and journal.is_file() and journal.stat().st_size > 0
    check_store(uri)  # its write lock rolls a hot journal back
    if hot and not (journal.is_file() and journal.stat().st_size > 0):
        print(
            f"rlvr: note: {journal} was left by a write cut short (a full disk, a file-size limit, a "
            f"killed stage); SQLite has rolled it back: {db.name} holds what it held before that write",
            file=sys.stderr,
        )
    if uri.startswith(("http://", "https://")):
        probe_server(uri)
    elif db is not None and db.is_file():
        probe_sqlite(uri, db)


def _call(uri: str, call: str, body: dict | None = None, query: dict | None = None) -> tuple[int, dict]:
    """(HTTP status, parsed JSON body) of one REST call: GET with `query`, POST with `body`; the
    credentials sent as MLflow's client sends them (`server_request`)."""
    bare, auth = server_request(uri)
    url = f"{bare.rstrip('/')}/api/2.0/mlflow/{call}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **auth})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, text = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise TrackingError(
            f"MLflow tracking server {public_uri(uri)}: {call} failed ({getattr(exc, 'reason', exc)})"
        ) from None
    try:
        parsed = json.loads(text or b"{}")
    except ValueError:
        parsed = {"message": text[:80].decode(errors="replace")}
    return status, parsed if isinstance(parsed, dict) else {}


def _ok(uri: str, call: str, answer: tuple[int, dict]) -> dict:
    status, body = answer
    if status != 200:
        what = ": ".join(str(x) for x in (body.get("error_code"), body.get("message")) if x)
        first = (what.splitlines() or [""])[0][:160]
        raise TrackingError(
            f"MLflow tracking server {public_uri(uri)}: {call} failed "
            f"(HTTP {status}{' ' + first if first else ''}); "
            "it answers /health but not the MLflow API a stage uses: fix the server, or unset "
            "MLFLOW_TRACKING_URI to use the local SQLite store"
        )
    return body


def probe_server(uri: str) -> None:
    """Ask an MLflow server what a stage asks; the probe run it makes is deleted again."""
    status, body = _call(uri, "experiments/get-by-name", query={"experiment_name": EXPERIMENT})
    if status == 404 and body.get("error_code") == "RESOURCE_DOES_NOT_EXIST":  # a stage would make it
        tags = [{"key": KIND_TAG, "value": KIND}]
        made = _call(uri, "experiments/create", {"name": EXPERIMENT, "tags": tags})
        experiment = _ok(uri, "experiments/create", made)["experiment_id"]
    else:
        experiment = _ok(uri, "experiments/get-by-name", (status, body))["experiment"]["experiment_id"]
    search = {"experiment_ids": [experiment], "filter": "attributes.status = 'RUNNING'", "max_results": 1}
    _ok(uri, "runs/search", _call(uri, "runs/search", search))
    now = int(time.time() * 1000)
    run = {"experiment_id": experiment, "run_name": PROBE_NAME, "start_time": now, "tags": []}
    run_id = _ok(uri, "runs/create", _call(uri, "runs/create", run))["run"]["info"]["run_id"]
    try:
        metric = {"key": "probe", "value": 1.0, "timestamp": now, "step": 0}
        batch = {"run_id": run_id, "params": [{"key": "probe", "value": "1"}], "metrics": [metric]}
        _ok(uri, "runs/log-batch", _call(uri, "runs/log-batch", batch))
        probe_artifact(uri, run_id)
        ended = {"run_id": run_id, "status": "FINISHED", "end_time": int(time.time() * 1000)}
        _ok(uri, "runs/update", _call(uri, "runs/update", ended))
    finally:  # a failure above is the one reported; a failed delete after it would hide it
        deleted = _call(uri, "runs/delete", {"run_id": run_id})
        if sys.exc_info()[0] is None:
            _ok(uri, "runs/delete", deleted)


def probe_artifact(uri: str, run_id: str) -> None:
    """A small artifact written to run `run_id` by MLflow's own client, as a stage writes its run
    records and checkpoints: through the server (proxied artifacts) or straight to the artifact store
    the run names. The only part of the probe that imports MLflow, and only for a server."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # a failing store fails at once
    from mlflow.tracking import MlflowClient

    try:
        MlflowClient(client_uri(uri)).log_text(
            run_id, "the guard's probe; its run is deleted\n", "rlvr-guard-probe.txt"
        )
    except Exception as exc:  # the store's own error, however raised: one line
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise TrackingError(
            f"MLflow tracking server {public_uri(uri)}: its artifact store refused a write ({first}); "
            "fix the server's artifact store (`mlflow server --artifacts-destination`), or unset "
            "MLFLOW_TRACKING_URI to use the local SQLite store"
        ) from None


STAGE_TABLES = ("experiments", "runs", "tags", "params", "metrics", "latest_metrics")  # what stages use


def probe_sqlite(uri: str, db: Path) -> None:
    """An existing SQLite store is a database MLflow made (its tables are there, or none yet: the
    first stage makes them), whose runs a search can read."""
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as con:
            tables = {row[0] for row in con.execute("select name from sqlite_master where type = 'table'")}
            missing = [t for t in STAGE_TABLES if t not in tables]
            if tables and missing:
                raise TrackingError(
                    f"MLflow tracking store {uri}: {db.name} has no table {missing[0]}: not an MLflow "
                    "store; move it away, or point MLFLOW_TRACKING_URI at the store"
                )
            if tables:
                con.execute("select run_uuid from runs where status = 'RUNNING' limit 1").fetchall()
                (revision,) = con.execute("select version_num from alembic_version").fetchone() or ("",)
    except sqlite3.Error as exc:
        raise TrackingError(f"MLflow tracking store {uri}: searching its runs failed ({exc})") from None
    if tables:
        check_schema(uri, db, revision)


def schema_revisions() -> tuple[set[str], str | None]:
    """Every schema revision the installed MLflow knows (its Alembic migrations, read as text: no
    MLflow import) and the newest of them, the one it makes and expects."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("mlflow")
    folder = Path(spec.origin).parent / "store" / "db_migrations" / "versions"
    revisions, parents = set(), set()
    for path in folder.glob("*.py"):
        text = path.read_text(errors="replace")
        mine = re.search(r'^revision\s*=\s*["\']([0-9A-Za-z_]+)["\']', text, re.M)
        down = re.search(r"^down_revision\s*=\s*(.+)$", text, re.M)
        if mine:
            revisions.add(mine.group(1))
        if down:
            parents.update(re.findall(r"[\"']([0-9A-Za-z_]+)[\"']", down.group(1)))
    heads = revisions - parents
    return revisions, (next(iter(heads)) if len(heads) == 1 else None)


def check_schema(uri: str, db: Path, revision: str) -> None:
    """The store's schema is the installed MLflow's: an older one fails a stage's first write (and
    MLflow would upgrade a store only when asked), a newer one was made by a newer MLflow."""
    from importlib.metadata import version

    known, head = schema_revisions()
    if head is None or revision == head:
        return
    mlflow = version("mlflow")
    if revision in known:
        raise TrackingError(
            f"MLflow tracking store {uri}: {db.name} was made by an older MLflow (schema {revision}, "
            f"MLflow {mlflow} expects {head}); upgrade it with `mlflow db upgrade {uri}` (back it up "
            "first), or move it away to start a new store"
        )
    raise TrackingError(
        f"MLflow tracking store {uri}: {db.name} was made by a newer MLflow than the installed "
        f"{mlflow} (schema {revision or 'unknown'}, which it does not know); install that MLflow, or "
        "move the store away to start a new one"
    )
