"""`rlvr verify --rerun [--perturb]`: the whole pipeline again in a fresh clone, against its commit.

Reproducibility is the project's own business: a clone of HEAD runs `dvc repro --force` (every
stage, none skipped) with its own code and MLflow store, and its results are compared with the ones
its commit holds, in one of three words (rlvr.report.moves): *identical* on the machine that made
them, *statistically the same* on another CPU, never *moved*. With `--perturb` every chain's initial
weights are multiplied by 1 + 1e-6 z (RLVR_PERTURB), changes the size of float32 rounding that the
chains amplify as another CPU's rounding would: the check that needs no second machine. The record
(word, moves, wall time, where the time went) goes into reports/rerun.json, which the report shows.

Plain `rlvr verify` compares the workspace's results with HEAD's in the same words
(`workspace_against_head`).
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rlvr.io.dvcinfo import repro_stream
from rlvr.io.files import read_json, write_json
from rlvr.io.gitinfo import clone as clone_repo
from rlvr.io.gitinfo import code_version, export_committed, git_commit, short_commit
from rlvr.io.system import cpu_model
from rlvr.pipeline.paths import PLAN
from rlvr.report.claims import load_claims, read_looks
from rlvr.report.moves import compare_results

PERTURBATION = "1e-6"  # RLVR_PERTURB of `--perturb`: float32-rounding-sized changes to every start
BUDGET_SECONDS = 1200  # the whole pipeline's time budget, fresh clone, every stage, 2 cores
RUNNING = re.compile(r"^Running stage '([^']+)'")


def clone_env(clone: Path) -> dict[str, str]:
    """The environment a command in a fresh clone runs with: the clone's own code (PYTHONPATH), this
    environment's packages (dvc on PATH) and no store or DVC root of this checkout's."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "DVC_ROOT", "RLVR_PERTURB")
    }
    env.update(PYTHONPATH=str(clone), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    return env


def stage_walls(lines: list[tuple[float, str]], t0: float, t_end: float) -> tuple[float, dict[str, float]]:
    """DVC's start (t0 to its first stage) and each stage's wall from timestamped output lines:
    a stage runs from its "Running stage" line to the next one's, the last one to `t_end`."""
    starts = [(t, m.group(1)) for t, line in lines if (m := RUNNING.match(line))]
    if not starts:
        raise RuntimeError("dvc repro ran no stage (no 'Running stage' line in its output)")
    walls = {}
    for (t, name), (t_next, _) in zip(starts, [*starts[1:], (t_end, None)], strict=True):
        walls[name] = t_next - t
    return starts[0][0] - t0, walls


def timed_repro(clone: Path, env: dict[str, str]) -> dict:
    """`dvc repro --force` in `clone`, its output timestamped line by line as it arrives: the wall,
    DVC's start, each stage's wall (`stage_walls`). A failure raises with the tail of its stderr."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:  # progress bars and errors: a file, never a full pipe
        proc = repro_stream(clone, ["repro", "--force"], {**env, "PYTHONUNBUFFERED": "1"}, err)
        lines = [(time.perf_counter(), line) for line in proc.stdout]
        code = proc.wait()
        t_end = time.perf_counter()
        if code != 0:
            err.seek(0)
            raise RuntimeError(f"dvc repro failed in the fresh clone (exit {code}):\n{err.read()[-2000:]}")
    dvc_start, walls = stage_walls(lines, t0, t_end)
    return {"wall_seconds": t_end - t0, "dvc_start_seconds": dvc_start, "stage_walls": walls}


def stage_profile(uri: str) -> dict:
    """Where one `dvc repro` spent its time, from a store that holds only that execution (a fresh
    clone's): every stage's MLflow run in start order, its seconds (the stage's own work) and the gap
    before it (the previous process's exit, DVC's bookkeeping, this process's start-up and imports).
    Totals by stage kind (sft, grpo, ...) and for the gaps: the overhead of one process per stage."""
    from mlflow.tracking import MlflowClient

    from rlvr.pipeline.tracking import EXPERIMENT

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = [
        r
        for r in client.search_runs(
            [exp.experiment_id], max_results=5000, order_by=["attributes.start_time ASC"]
        )
        if "mlflow.parentRunId" not in r.data.tags
    ]
    stages, prev_end = [], None
    for r in runs:
        start, end = r.info.start_time / 1000, (r.info.end_time or r.info.start_time) / 1000
        stages.append(
            {
                "stage": r.data.tags.get("dvc.stage", r.info.run_name),
                "seconds": round(end - start, 1),
                "gap_before": round(start - prev_end, 1) if prev_end is not None else None,
            }
        )
        prev_end = end
    by_kind: dict[str, float] = {}
    for s in stages:
        kind = s["stage"].split("@")[0]
        by_kind[kind] = round(by_kind.get(kind, 0.0) + s["seconds"], 1)
    gaps = [s["gap_before"] for s in stages if s["gap_before"] is not None]
    return {
        "stages": stages,
        "seconds_by_kind": by_kind,
        "gap_seconds_total": round(sum(gaps), 1),
        "gap_seconds_median": round(statistics.median(gaps), 1) if gaps else None,
        "stage_seconds_total": round(sum(s["seconds"] for s in stages), 1),
    }


def machine() -> dict:
    """Where a rerun ran: its numbers are bit-equal to the committed ones only on the machine that
    made those."""
    from importlib.metadata import version

    return {"cpu": cpu_model(), "cpu_count": os.cpu_count(), "torch": version("torch")}


def rerun_in_clone(root: Path, perturb: bool = False, keep: Path | None = None) -> dict:
    """`dvc repro --force` in a fresh clone of HEAD (with RLVR_PERTURB when `perturb`), its results
    against the ones its commit holds (rlvr.report.moves.compare_results): the record of the rerun.

    The clone's own code runs (PYTHONPATH points at it) with this environment's packages; its MLflow
    store is its own. Forced, because a plain `dvc repro` there would skip a stage whose outputs git
    holds and whose inputs come out identical: it would check less of the pipeline. `keep`: move the
    clone there afterwards instead of deleting it."""
    flag = " --perturb" if perturb else ""
    with tempfile.TemporaryDirectory(prefix="rlvr-rerun-") as tmp:
        clone = Path(tmp) / "clone"
        clone_repo(root, clone)
        committed = Path(tmp) / "committed"  # the commit's results, before the rerun replaces them
        shutil.copytree(clone / "reports", committed)
        env = {**clone_env(clone), **({"RLVR_PERTURB": PERTURBATION} if perturb else {})}
        run = timed_repro(clone, env)
        record = {
            "command": f"rlvr verify --rerun{flag}",
            "perturbation": f"RLVR_PERTURB={PERTURBATION}" if perturb else None,
            "commit": git_commit(clone),  # the clone's: the checkout may have moved on meanwhile
            "working_tree_differs_from_commit": code_version(root)["dirty"],
            "wall_seconds": round(run["wall_seconds"], 1),
            "target_wall_seconds": BUDGET_SECONDS,
            "stages_run": len(run["stage_walls"]),
            "profile": stage_profile(f"sqlite:///{clone / 'mlflow.db'}"),
            "machine": machine(),
            **compare_results(
                committed,
                clone / "reports",
                load_claims(clone / "experiments" / "claims.yaml"),
                read_looks(clone / PLAN),
            ),
        }
        if keep is not None:
            shutil.move(str(clone), str(keep))
    return record


def write_record(path: Path, kind: str, record: dict) -> Path:
    """Put `record` under `kind` ("rerun", "perturbed") in the reruns file (reports/rerun.json),
    keeping the other kind's."""
    records = read_json(path) if path.is_file() else {}
    return write_json(path, {**records, kind: record})


def workspace_against_head(root: Path) -> dict | None:
    """The workspace's results (reports/) against HEAD's, judged by the workspace's claims: the
    comparison with its word, and HEAD's short commit. None outside git or where HEAD has none."""
    with tempfile.TemporaryDirectory(prefix="rlvr-head-") as tmp:
        if not export_committed(root, Path(tmp), "reports/metrics"):
            return None
        export_committed(root, Path(tmp), "reports/passk-counts.json")  # where HEAD has one
        committed = Path(tmp) / "reports"
        claims = load_claims(root / "experiments" / "claims.yaml")
        looks = read_looks(root / PLAN)
        return {"commit": short_commit(root), **compare_results(committed, root / "reports", claims, looks)}
