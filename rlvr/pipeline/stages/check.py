"""Stage `check`: params.yaml passed validation and the MLflow store answers. The dispatcher has
already loaded and checked params.yaml (`load_params`, `tasks.check_params`, as `rlvr check` does);
opening this stage's MLflow run checks the tracking store. Then it writes the marker every other
stage depends on. The marker's content is fixed, so it changes nothing downstream while all is well;
when something is wrong, `dvc repro` stops here, before DVC removes any other stage's outputs."""

from __future__ import annotations

from rlvr.pipeline.config import Params
from rlvr.pipeline.files import write_text
from rlvr.pipeline.paths import CheckPaths
from rlvr.pipeline.seeds import tracked

MARKER = (
    "params.yaml passed `rlvr check` and the MLflow store answered; "
    "every stage of dvc.yaml depends on this file\n"
)


def run(params: Params, paths: CheckPaths, progress: bool = True) -> dict:  # noqa: ARG001
    with tracked("check", None, params, {}):
        write_text(paths.marker, MARKER)
    return {"ok": True}
