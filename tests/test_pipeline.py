"""Pipeline smoke: the real dvc.yaml on tiny params in a throw-away copy of the repo."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, tiny_raw

BIN = Path(sys.executable).parent


def sh(cmd, cwd, env):
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, shell=True)
    assert out.returncode == 0, f"{cmd} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout + out.stderr


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A temp git + dvc repo holding this checkout's code, pipeline and tiny params."""
    d = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "rlvr", d / "rlvr", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "pyproject.toml", ".gitignore"):
        shutil.copy(ROOT / name, d / name)
    (d / "params.yaml").write_text(yaml.safe_dump(tiny_raw(), sort_keys=False))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(d)}
    env.pop("MLFLOW_TRACKING_URI", None)
    sh("git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm init", d, env)
    sh("dvc init -q && dvc config core.analytics false", d, env)
    return d, env


def test_repro_produces_every_output_and_second_repro_runs_nothing(repo):
    d, env = repo
    sh("dvc repro", d, env)
    lock = yaml.safe_load((d / "dvc.lock").read_text())
    stages = yaml.safe_load((d / "dvc.yaml").read_text())["stages"]
    for name, entry in lock["stages"].items():
        for out in entry.get("outs", []):
            assert (d / out["path"]).exists(), f"{name}: missing {out['path']}"
    assert set(lock["stages"]) == {f"{s}@{r}" for s in stages for r in tiny_raw()["sft"]}
    metrics = json.loads((d / "reports/metrics/sft-two_digit.json").read_text())
    assert len(metrics["mlflow_run_id"]) == 32 and 0 <= metrics["sampled_acc_heldout"] <= 1
    assert (d / "mlflow.db").exists()

    second = sh("dvc repro", d, env)
    assert "Running stage" not in second
    assert "up to date" in sh("dvc status", d, env)


def test_changing_one_runs_param_reruns_only_its_stages(repo):
    d, env = repo
    raw = yaml.safe_load((d / "params.yaml").read_text())
    raw["sft"]["single_digit"]["epochs"] = 2
    (d / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    out = sh("dvc repro", d, env)
    assert "Running stage 'sft@single_digit'" in out
    assert "Running stage 'data@single_digit'" not in out
    assert "Running stage 'sft@two_digit'" not in out and "Running stage 'data@two_digit'" not in out
