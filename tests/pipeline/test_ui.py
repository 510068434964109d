"""`rlvr ui`: the MLflow UI on this checkout's store, opened on the runs table in the model-training view."""

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT, ctrl_c_as_at_a_terminal
from mlflow.tracking import MlflowClient

from rlvr.cli import main
from rlvr.fields import UserError
from rlvr.pipeline.tracking import EXPERIMENT, stage_run
from rlvr.tools import ui


def test_the_url_opens_the_runs_table_in_the_model_training_view_with_the_saved_columns():
    url = ui.runs_url("http://127.0.0.1:5123/", "7")
    assert url == (
        "http://127.0.0.1:5123/#/experiments/7/runs?workflowType=machine_learning&viewStateShareKey=rlvr-runs"
    )
    columns = ui.view_state(n=64)["selectedColumns"]
    assert {"params.`beta`", "params.`lr`", "params.`advantage`", "params.`variant`"} <= set(columns)
    assert {"metrics.`eval_acc_final`", "metrics.`pass_at_1`", "metrics.`pass_at_64`"} <= set(columns)
    assert "metrics.`pass_at_4`" in ui.view_state(n=4)["selectedColumns"]  # pass@n of the params' n


def test_rlvr_ui_without_a_store_says_to_run_the_pipeline_first(tmp_path, monkeypatch, capsys):
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")  # a checkout whose pipeline has not run
    (tmp_path / "params.yaml").write_text("seed: 0\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert main(["ui", "--port", "5999"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err == f"rlvr: error: no MLflow store at {tmp_path / 'mlflow.db'}: run `dvc repro` first to create it"
    )


def test_a_port_in_use_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(UserError, match=f"port {port} on 127.0.0.1 is in use: pass another with --port"):
            ui.check_port("127.0.0.1", port)


def test_the_saved_view_is_stored_in_the_experiment(tmp_path, monkeypatch, mlflow_store):
    monkeypatch.chdir(tmp_path)
    with stage_run("grpo@v", {"beta": 0.0}, {}, "h"):
        pass
    db = Path(mlflow_store.removeprefix("sqlite:///"))
    experiment_id = ui.save_view(db, 64)
    exp = MlflowClient(mlflow_store).get_experiment_by_name(EXPERIMENT)
    assert exp.experiment_id == experiment_id
    assert json.loads(exp.tags[ui.VIEW_TAG]) == ui.view_state(64)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_rlvr_ui_serves_the_store_and_prints_the_runs_url(tmp_path):
    """`rlvr ui` in a checkout with a store: it prints the URL once the server answers, the page and
    the experiment (with its saved view) are served, and Ctrl-C stops the server with it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MLFLOW_TRACKING_URI", None)
    script = (
        "from rlvr.pipeline.tracking import stage_run\n"
        "with stage_run('grpo@v', {'beta': 0.0}, {}, 'h'):\n    pass\n"
    )
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, check=True, timeout=120)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvr", "ui", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_as_at_a_terminal,
    )
    try:
        proc.stdout.readline()  # "MLflow UI on ..."
        url = proc.stdout.readline().strip()
        base = f"http://127.0.0.1:{port}"
        assert url.startswith(f"{base}/#/experiments/") and "workflowType=machine_learning" in url
        experiment_id = url.split("/#/experiments/")[1].split("/")[0]
        assert "<html" in urllib.request.urlopen(base + "/", timeout=10).read().decode().lower()
        got = urllib.request.urlopen(
            f"{base}/ajax-api/2.0/mlflow/experiments/get?experiment_id={experiment_id}", timeout=10
        )
        tags = {t["key"]: t["value"] for t in json.loads(got.read())["experiment"]["tags"]}
        assert json.loads(tags[ui.VIEW_TAG]) == ui.view_state(64)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "MLflow UI stopped" in out
    with pytest.raises(ConnectionRefusedError):  # the server went with it
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
