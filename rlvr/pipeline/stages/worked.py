"""Stage `worked`: every closed-form number of both chapters as one JSON keyed by example id, and
the figures drawn from it."""

from __future__ import annotations

from rlvr.determinism import set_determinism, thread_budget
from rlvr.io.files import svg_beside
from rlvr.pipeline.paths import WorkedPaths
from rlvr.pipeline.records import write_metrics
from rlvr.pipeline.seeds import tracked
from rlvr.pipeline.stageparams import StageParams
from rlvr.report.workedplots import worked_figures
from rlvr.worked import worked_metrics


def run(params: StageParams, paths: WorkedPaths, progress: bool = True) -> dict:  # noqa: ARG001
    set_determinism(params.worked.seed, thread_budget(params.threads))
    with tracked(params, {}) as mlrun:
        metrics = worked_metrics(params.worked)
        write_metrics(paths.metrics, {**metrics, "mlflow_run_id": mlrun.run_id, "made": mlrun.made})
        figures = worked_figures(metrics, {p.name: p for p in paths.figures})
        for path in (paths.metrics, *figures, *map(svg_beside, figures)):
            mlrun.log_artifact(path)
    return {"examples": sorted(metrics)}
