"""Stage `worked`: every closed-form number of both chapters as one JSON keyed by example id, and
the figures drawn from it."""

from __future__ import annotations

from rlvr import plots
from rlvr.config import Params
from rlvr.paths import WorkedPaths
from rlvr.runtime import set_determinism, thread_budget, write_json
from rlvr.worked import worked_metrics


def run(params: Params, paths: WorkedPaths, progress: bool = True) -> dict:  # noqa: ARG001
    set_determinism(params.worked.seed, thread_budget(params.threads))
    metrics = worked_metrics(params.worked)
    write_json(paths.metrics, metrics)
    plots.worked_figures(metrics, {p.name: p for p in paths.figures})
    return {"examples": sorted(metrics)}
