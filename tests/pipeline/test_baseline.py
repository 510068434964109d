"""The path docs/comparing.md gives a user on a new machine: a baseline of the committed pipeline
made on their own CPU first, then an experiment, diffed against that baseline. The committer's CPU
is stood in for by a perturbed run (RLVR_PERTURB: every chain's start moved by rounding-sized
changes, as another CPU's floats would), so its committed results differ from the user's rerun."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import tiny_checkout

pytestmark = pytest.mark.slow  # integration: three `dvc repro`s of the tiny pipeline

BIN = Path(sys.executable).parent
EXPERIMENT = "++variants.dapo.lr=0.002"  # one param: the documented example's
DEPENDENCY_COLUMNS = r"^[^:]*/[^:]*$|^params\.yaml$"  # docs/comparing.md's `--drop`: paths without a metric
ITS_EFFECT = {
    "reports/headline/grpo-dapo.json",
    "reports/headline/passk.json",
    "reports/headline/report.json",
}


def sh(cmd, cwd, env):
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, shell=True)
    assert out.returncode == 0, f"{cmd} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout + out.stderr


def changed_metrics(diff_json: str) -> set[str]:
    """The metrics files `dvc exp diff --json` lists with at least one changed value."""
    return {path for path, values in json.loads(diff_json).get("metrics", {}).items() if values}


def test_a_baseline_on_the_users_machine_leaves_only_the_experiments_effect(tmp_path):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("RLVR_PERTURB", None)
    origin, clone = tmp_path / "origin", tmp_path / "clone"
    origin.mkdir()
    tiny_checkout(origin, {**env, "PYTHONPATH": str(origin)})
    committer = {**env, "PYTHONPATH": str(origin), "RLVR_PERTURB": "1e-3"}  # "another CPU"
    sh("dvc repro", origin, committer)
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm results", origin, env)
    sh(f"git clone -q {origin} {clone}", tmp_path, env)
    user = {**env, "PYTHONPATH": str(clone)}

    sh("dvc exp run --force --name baseline", clone, user)  # the documented first command
    sh(f"dvc exp run -S '{EXPERIMENT}' --name lr", clone, user)

    against_baseline = changed_metrics(sh("dvc exp diff baseline lr --json", clone, user))
    assert against_baseline and against_baseline <= ITS_EFFECT, against_baseline
    params = json.loads(sh("dvc exp diff baseline lr --json", clone, user))["params"]["params.yaml"]
    assert set(params) == {"variants.dapo.lr"}, params
    against_head = changed_metrics(sh("dvc exp diff HEAD lr --json", clone, user))
    assert against_head - ITS_EFFECT, "the committer's results should differ beyond the change"
    assert "reports/headline/sft-two_digit.json" in against_head  # the drift the baseline removes
    shown = sh(
        f"dvc exp show --no-pager --only-changed --drop '{DEPENDENCY_COLUMNS}'",
        clone,
        {**user, "COLUMNS": "200"},
    )
    assert "…" not in shown and "variants.dapo.lr" in shown and "grpo-dapo.json:eval_acc_final" in shown, (
        shown
    )
    diff = sh("rlvr diff grpo dapo", clone, user)  # both variants now made on this machine
    assert "different CPUs" not in diff and "settings that differ:" in diff, diff
