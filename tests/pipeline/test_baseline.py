"""The path docs/comparing.md gives a user on a new machine: a baseline of the committed pipeline
made on their own CPU first, then an experiment, diffed against that baseline. The committer's CPU
is stood in for by a perturbed run (RLVR_PERTURB: every chain's start moved by rounding-sized
changes, as another CPU's floats would), so its committed results differ from the user's rerun."""

import json
import os
import re
import sys
from pathlib import Path

import pytest
from conftest import ROOT, sh, tiny_checkout

pytestmark = pytest.mark.slow  # integration: three `dvc repro`s of the tiny pipeline

BIN = Path(sys.executable).parent
ITS_EFFECT = {
    "reports/headline/grpo-dapo.json",
    "reports/headline/passk.json",
    "reports/headline/report.json",
}


def documented_block() -> list[str]:
    """The commands of the docs/comparing.md block this file is named as testing, as written."""
    text = (ROOT / "docs/comparing.md").read_text()
    marker = r"<!-- tested in tests/pipeline/test_baseline.py[^>]*-->\s*```bash\n(.*?)```"
    block = re.search(marker, text, re.S)
    assert block, "docs/comparing.md has no block marked as tested here"
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.group(1).splitlines() if line.strip()]


def changed_metrics(diff: dict) -> set[str]:
    """The metrics files a `dvc metrics diff --json` ({path: changes}) lists with a changed value."""
    return {path for path, values in diff.items() if values}


def test_the_block_is_a_branch_of_this_machines_results_then_an_experiment():
    commit, experiment, diff, show = documented_block()
    assert commit.startswith("git switch -c ") and "dvc repro --force" in commit and "git commit" in commit
    assert experiment.startswith("dvc exp run -S ")
    assert (diff, show.split(" --")[0]) == ("dvc exp diff", "dvc exp show")


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
    who = {f"GIT_{role}_{key}": "u" for role in ("AUTHOR", "COMMITTER") for key in ("NAME", "EMAIL")}
    user = {**env, **who, "PYTHONPATH": str(clone), "COLUMNS": "200"}
    commit, experiment, diff, show = documented_block()

    committers = sh("git rev-parse HEAD", clone, user).strip()
    sh(commit, clone, user)
    assert sh("git status --porcelain", clone, user) == "", "the branch's commit should hold every result"
    against_committer = changed_metrics(json.loads(sh(f"dvc metrics diff {committers} --json", clone, user)))
    assert "reports/headline/sft-two_digit.json" in against_committer  # the drift the branch removes
    sh(experiment, clone, user)
    changed = json.loads(sh(f"{diff} --json", clone, user))
    moved = changed_metrics(changed["metrics"])
    assert moved and moved <= ITS_EFFECT, changed
    assert set(changed["params"]["params.yaml"]) == {"variants.dapo.lr"}, changed["params"]
    shown = sh(show, clone, user)
    assert "…" not in shown and "variants.dapo.lr" in shown, shown
    assert "grpo-dapo.json:acc_end" in shown, shown
    width = max(map(len, shown.splitlines()))
    print(f"dvc exp show --only-changed --drop ...: {width} columns")  # docs/comparing.md quotes it
    assert width <= 200, shown
    out = sh("rlvr diff grpo dapo", clone, user)  # both variants now made on this machine
    assert "different CPUs" not in out and "settings that differ:" in out, out
