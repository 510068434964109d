"""The pipeline against its compute floor (`rlvr bench --only pipeline`).

Wall: `dvc repro --force` in a fresh clone, each stage's share read off DVC's own output (from its
"Running stage" line to the next one's, so DVC's bookkeeping after a stage and the next process's
start-up count against the stage that caused them). Floor: the same stages, in the same clone, called
one after the other in one process that has already imported torch, MLflow and every stage module:
each stage's work (its inputs read, its training, its outputs written, its MLflow runs logged) with
no process start-up, no imports and no DVC. Their ratio is what the machinery around the work costs.

    python -m rlvr.bench.floor sft@two_digit passk ...   # (in a clone) the floor, as one JSON line
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rlvr.bench.targets import TARGETS
from rlvr.tools.rerun import clone_env, timed_repro


def in_process_floor(clone: Path, env: dict[str, str], stages: list[str]) -> dict[str, float]:
    """Each stage's seconds called in one warm process in `clone` (`main` below)."""
    run = subprocess.run(
        [sys.executable, "-m", "rlvr.bench.floor", *stages],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        raise RuntimeError(f"the in-process floor failed (exit {run.returncode}):\n{run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def ratio_rows(walls: dict[str, float], floor: dict[str, float]) -> list[dict]:
    """One row per stage: wall, floor, the seconds between them and their ratio."""
    return [
        {
            "stage": name,
            "wall_seconds": round(walls[name], 2),
            "floor_seconds": round(floor[name], 2),
            "overhead_seconds": round(walls[name] - floor[name], 2),
            "ratio": round(walls[name] / floor[name], 2) if floor[name] > 0 else None,
        }
        for name in walls
    ]


def by_kind(rows: list[dict]) -> dict[str, dict]:
    """The rows summed by stage kind (sft, grpo, ...): where the overhead collects."""
    out: dict[str, dict] = {}
    for r in rows:
        k = out.setdefault(r["stage"].split("@")[0], {"stages": 0, "wall_seconds": 0.0, "floor_seconds": 0.0})
        k["stages"] += 1
        k["wall_seconds"] += r["wall_seconds"]
        k["floor_seconds"] += r["floor_seconds"]
    for k in out.values():
        k["wall_seconds"], k["floor_seconds"] = round(k["wall_seconds"], 1), round(k["floor_seconds"], 1)
        k["ratio"] = round(k["wall_seconds"] / k["floor_seconds"], 2) if k["floor_seconds"] else None
    return out


METHOD = (
    "Wall: `dvc repro --force` in a fresh clone, each stage from its 'Running stage' line to the "
    "next. Floor: the same stages in the same clone called one after another in one process "
    "with torch, MLflow and the stage modules already imported (inputs read, training, outputs "
    "written, MLflow logged; no process start-up, no imports, no DVC)."
)


def measure(root: Path, rev: str) -> dict:
    """A fresh clone of commit `rev` of `root`: its timed `dvc repro --force`, then the in-process
    floor of the same stages (the floor code is the clone's own), and their ratio per stage, per
    kind and in total."""
    import tempfile

    from rlvr.io.gitinfo import clone as clone_repo
    from rlvr.io.gitinfo import git_commit

    with tempfile.TemporaryDirectory(prefix="rlvr-floor-") as tmp:
        clone = Path(tmp) / "fresh"
        clone_repo(root, clone, rev)
        env = clone_env(clone)
        commit = git_commit(clone)  # what ran: this checkout may move on meanwhile
        repro = timed_repro(clone, env)
        floor = in_process_floor(clone, env, list(repro["stage_walls"]))
    rows = ratio_rows(repro["stage_walls"], floor)
    floor_total = sum(floor.values())
    return {
        "commit": commit,
        "wall_seconds": round(repro["wall_seconds"], 1),
        "floor_seconds": round(floor_total, 1),
        "ratio": round(repro["wall_seconds"] / floor_total, 3),
        "dvc_start_seconds": round(repro["dvc_start_seconds"], 2),
        "by_kind": by_kind(rows),
        "stages": rows,
    }


def bench(params, against: str | None = None) -> dict:  # noqa: ARG001 (every benchmark takes the params)
    """A fresh clone of HEAD against its compute floor (`measure`; target: rlvr/bench/targets.yaml). With
    `against` (a commit: the previous main, say), that commit is measured the same way first, back
    to back on the same machine, so a change's cost in wall time is read off one run of the bench."""
    from rlvr.io.gitinfo import git_commit
    from rlvr.pipeline.store import repo_root

    root = repo_root()
    head = git_commit(root)  # the commit to measure, fixed before the first clone
    before = {"against": measure(root, against)} if against else {}
    return {"method": METHOD, **measure(root, head), **TARGETS["pipeline"], **before}


def warm_imports() -> None:
    """What a stage process imports before its work: torch, MLflow's client and store, every stage."""
    import importlib

    import mlflow  # noqa: F401
    import torch  # noqa: F401

    from rlvr.pipeline.specs import STAGES
    from rlvr.pipeline.store import tracking_uri
    from rlvr.pipeline.tracking import StoreClient

    for name in STAGES:
        importlib.import_module(f"rlvr.pipeline.stages.{name}")
    from mlflow.tracking import MlflowClient

    StoreClient(MlflowClient(tracking_uri()), tracking_uri()).search_experiments()  # store opened


def main(stages: list[str]) -> dict[str, float]:
    """Each stage ("sft@two_digit", "passk") run in this process, in order: its seconds."""
    from rlvr.pipeline.run import run_stage

    warm_imports()
    seconds = {}
    for stage in stages:
        name, _, key = stage.partition("@")
        t0 = time.perf_counter()
        run_stage(name, key or None, progress=False)
        seconds[stage] = time.perf_counter() - t0
    return seconds


if __name__ == "__main__":
    result = main(sys.argv[1:])
    print(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)  # as a stage leaves: no interpreter teardown
