"""`dvc exp run -S` rewrites params.yaml with its own YAML dumper. The file is kept in that dumper's
layout (`rlvr check --layout`), so the rewrite changes only the keys set; and with the shared SFT
settings merged by the loader, not by YAML anchors, every run still resolves to what it should."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from rlvr.io.params import load_params, read_yaml

pytestmark = pytest.mark.slow  # a clone of the repository and a real `dvc exp run` (stage check only)


def resolved(params_file: Path) -> dict:
    """Every SFT run and starts run as the loader resolves it."""
    p = load_params(params_file)
    runs = {f"sft.{name}": p.sft_run(name) for name in p.sft}
    runs |= {f"starts.runs.{name}": run for name, run in p.starts.runs.items()}
    return {name: json.loads(json.dumps(run.__dict__, default=str)) for name, run in runs.items()}


def test_a_dvc_rewrite_moves_every_run_that_takes_the_default_and_only_the_run_that_states_a_key(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DVC_ROOT", "DVC_STAGE", "DVC_EXP_NAME")},
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }
    before = resolved(clone / "params.yaml")
    raw_before = read_yaml(clone / "params.yaml")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "dvc",
            "exp",
            "run",
            "-S",
            "sft_defaults.grad_clip=0.5",
            "-S",
            "++sft.two_digit.lr=0.002",
            "check",
        ],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    after = resolved(clone / "params.yaml")
    for name, settings in before.items():
        section, _, entry = name.rpartition(".")
        stated = raw_before["sft"][entry] if section == "sft" else raw_before["starts"]["runs"][entry]
        expected = {**settings, **({} if "grad_clip" in stated else {"grad_clip": 0.5})}
        if name == "sft.two_digit":
            expected["lr"] = 0.002
        assert after[name] == expected, name
    diff = subprocess.run(
        ["git", "diff", "-U0", "params.yaml"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == [
        "-  grad_clip: 1.0",
        "+  grad_clip: 0.5",
        "+    lr: 0.002",
    ]  # the file is in DVC's layout
    raw_after = read_yaml(clone / "params.yaml")
    raw_after["sft_defaults"]["grad_clip"] = raw_before["sft_defaults"]["grad_clip"]
    del raw_after["sft"]["two_digit"]["lr"]
    assert raw_after == raw_before  # the two keys, and nothing else, mean something new
