"""Stage `check`, the guard: what every stage needs before DVC may remove its outputs.

DVC deletes a stage's outputs before it runs the stage's command, so a check inside a stage comes
too late: a stage that then fails (a dead tracking server, a bad RLVR_THREADS) has already lost its
committed metrics and curves. This stage runs first on every `dvc repro` (`always_changed`: never
skipped, never restored from the run-cache) and every other stage depends on its marker. It checks
params.yaml (the dispatcher has loaded it as `rlvr check` does, refusing a `device: cuda` that
sees no GPU), the thread budget RLVR_THREADS gives, and that the MLflow store answers the calls
the stages make (`rlvr.pipeline.probe`: on a server, a probe run made and deleted), that the Ray
cluster RAY_ADDRESS names (if set) answers and every node of it runs the stage code on this
machine's torch (`rlvr.pipeline.cluster`), and that every stage's outputs can be written (room,
permission: `guard.preflight`). The marker's
bytes never change, so a passing check leaves every other stage cached; a failing one stops
`dvc repro` here.

It logs no MLflow run: it runs on every `dvc repro`, and would add one run each time.
"""

from __future__ import annotations

from rlvr.determinism import thread_budget
from rlvr.io.files import write_text
from rlvr.pipeline import cluster, guard
from rlvr.pipeline.paths import CheckPaths
from rlvr.pipeline.probe import probe_store
from rlvr.pipeline.stageparams import StageParams
from rlvr.pipeline.store import tracking_uri

MARKER = (
    "params.yaml, RLVR_THREADS and the MLflow store passed the guard (stage check, run on every "
    "dvc repro); every stage of dvc.yaml depends on this file\n"
)


def run(params: StageParams, paths: CheckPaths, progress: bool = True) -> dict:  # noqa: ARG001
    threads = thread_budget(params.threads)  # a bad RLVR_THREADS stops here, not mid-stage
    probe_store(tracking_uri())
    where = cluster.address()
    nodes = cluster.check_cluster(where) if where is not None else None  # the chains' executor
    guard.preflight(params.every_output())  # what any stage will write: room, permission
    write_text(paths.marker, MARKER)
    return {"ok": True, "threads": threads, **({"cluster": nodes} if nodes else {})}
