"""`rlvr ui`: the MLflow UI on this checkout's store, opened on the runs table of the model-training view.

MLflow 3's UI opens on its GenAI pages (traces, evaluations) unless the URL asks for the model-training
view (`workflowType=machine_learning`), and shows no param or metric column until one is picked. So
`rlvr ui` stores a saved view in the experiment (the tag `mlflow.sharedViewState.<key>`, which is how the
UI's own *Share* button saves one) with the columns worth reading beside the chapters chosen, and prints
the runs-table URL that opens it:

    http://127.0.0.1:5000/#/experiments/1/runs?workflowType=machine_learning&viewStateShareKey=rlvr-runs
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

from rlvr.fields import UserError
from rlvr.pipeline.tracking import EXPERIMENT

VIEW_KEY = "rlvr-runs"  # the saved view's name: tag mlflow.sharedViewState.rlvr-runs
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
WORKFLOW = "machine_learning"  # the UI's model-training view (its other one is "genai")

# The columns the saved view shows: what identifies a run and its settings, then the headline numbers
# of each stage (GRPO, pass@k, SFT), as the runs log them. A run without one shows an empty cell.
PARAM_COLUMNS = (
    "variant",
    "sft_run",
    "seed",
    "beta",
    "lr",
    "advantage",
    "aggregation",
    "ratio",
    "group_size",
    "inner_epochs",
    "steps",
)
METRIC_COLUMNS = (
    "eval_acc_start",
    "eval_acc_final",
    "kl_k3_nats_max",
    "clip_frac_max",
    "entropy_nats_final",
    "pass_at_1",
    "pass_at_{n}",
    "never_solved",
    "final_loss",
    "sampled_acc_heldout",
)


def column(kind: str, name: str) -> str:
    """The UI's name for a runs-table column: params.`beta`, metrics.`pass_at_1`."""
    return f"{kind}.`{name}`"


def view_state(n: int = 64) -> dict:
    """The saved view: its selected columns, in this order (the UI would put metrics first);
    `pass_at_{n}` is pass@n of the pass@k stage's n."""
    columns = [column("params", p) for p in PARAM_COLUMNS]
    columns += [column("metrics", m.format(n=n)) for m in METRIC_COLUMNS]
    return {"selectedColumns": columns, "columnOrder": ["duration", *columns]}  # duration: after Created


def runs_url(base: str, experiment_id: str) -> str:
    """The experiment's runs table in the model-training view, with the saved view's columns."""
    query = urlencode({"workflowType": WORKFLOW, "viewStateShareKey": VIEW_KEY})
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{query}"


def store_path(root: Path) -> Path:
    return root / "mlflow.db"


def check_store(root: Path) -> Path:
    """This checkout's SQLite store, or one line saying how to make it."""
    db = store_path(root)
    if db.is_file():
        return db
    elsewhere = os.environ.get("MLFLOW_TRACKING_URI")
    hint = f"; the stages log to MLFLOW_TRACKING_URI={elsewhere}: open that server's UI" if elsewhere else ""
    raise UserError(f"no MLflow store at {db}: run `dvc repro` first to create it{hint}")


def check_port(host: str, port: int) -> None:
    """Refuse, in one line, a port something else listens on (before MLflow starts and fails later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UserError(f"port {port} on {host} is in use: pass another with --port") from None
            raise UserError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def save_view(db: Path, n: int) -> str:
    """Store the saved view in experiment rlvr-repro (rewritten each time, so it follows this code);
    returns the experiment's id."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is None:
        raise UserError(f"{db} holds no experiment {EXPERIMENT!r}: run `dvc repro` first to log one")
    state = json.dumps(view_state(n), separators=(",", ":"))
    if exp.tags.get(VIEW_TAG) != state:
        client.set_experiment_tag(exp.experiment_id, VIEW_TAG, state)
    return exp.experiment_id


def server_command(db: Path, host: str, port: int) -> list[str]:
    """`mlflow ui` on the store, its artifacts where the stages put them (`mlartifacts/` beside it)."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        f"sqlite:///{db}",
        "--artifacts-destination",
        str(db.parent / "mlartifacts"),
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
    ]


def _wait_healthy(proc: subprocess.Popen, base: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise UserError(f"mlflow ui exited with status {proc.returncode} before answering at {base}")
        try:
            urllib.request.urlopen(f"{base}/health", timeout=2).read()
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    raise UserError(f"mlflow ui did not answer at {base}/health within {timeout:.0f} s")


def _interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def serve(root: Path, port: int, host: str = "127.0.0.1", n: int = 64, timeout: float = 120) -> str:
    """Start the MLflow UI on `root`'s store, print the runs table's URL once it answers, and serve
    until Ctrl-C (or until the server stops)."""
    db = check_store(root)
    check_port(host, port)
    experiment_id = save_view(db, n)
    base = f"http://{host}:{port}"
    signal.signal(signal.SIGTERM, _interrupt)  # stopped like Ctrl-C: the server goes with it
    proc = subprocess.Popen(  # the server's log on stderr: stdout holds the URL alone
        server_command(db, host, port), cwd=root, stdout=sys.stderr, start_new_session=True
    )
    try:
        _wait_healthy(proc, base, timeout)
        print(f"MLflow UI on {db} (Ctrl-C to stop); runs table, model-training view:", flush=True)
        print(runs_url(base, experiment_id), flush=True)
        code = proc.wait()
    except KeyboardInterrupt:
        return "MLflow UI stopped"
    finally:
        _stop(proc)
    if code != 0:
        raise UserError(f"mlflow ui exited with status {code}")
    return "MLflow UI stopped"
