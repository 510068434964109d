"""`rlvr restore`: the outputs a failed stage left missing, back as the last `dvc repro` recorded them.

DVC removes a stage's outputs before it runs the stage's command, so a stage that fails after the
guard passed (a fault no check foresees: a server that dies mid-stage, a killed process) leaves
them missing, the git-tracked metrics, curves and figures among them. They are not lost: the ones
git tracks are at HEAD, the rest (checkpoints) in DVC's cache under the hashes dvc.lock records.
This puts back every output dvc.lock records that the workspace lacks, and only those: an output
that is there, changed or not, is left as it is.
"""

from __future__ import annotations

from pathlib import Path

from rlvr.fields import UserError
from rlvr.io.dvcinfo import last_error
from rlvr.io.dvcinfo import run as dvc
from rlvr.io.gitinfo import checkout_head, tracked_in_head
from rlvr.pipeline.paths import CHECKED
from rlvr.pipeline.provenance import load_lock


class RestoreError(UserError):
    """An output could not be put back (one line naming it and why)."""


def missing_outputs(root: Path) -> list[str]:
    """Every output dvc.lock records that is not in the workspace, in dvc.lock's order; the guard's
    marker aside (`check` runs on every `dvc repro` and writes it again: it is neither in git nor in
    DVC's cache)."""
    outs = [o["path"] for stage in load_lock(root).values() for o in stage.get("outs", [])]
    return [p for p in dict.fromkeys(outs) if not (root / p).exists() and Path(p) != CHECKED]


def _failed(what: str, command: str, why: str | None) -> None:
    if why is not None:
        raise RestoreError(f"{what}: `{command} ...` failed ({why})")


def restore(root: Path) -> dict:
    """Put back every missing output: git-tracked ones from HEAD, the others from DVC's cache."""
    missing = missing_outputs(root)
    from_git = tracked_in_head(root, missing)
    from_cache = [p for p in missing if p not in from_git]
    if from_git:
        _failed("outputs git tracks", "git checkout HEAD", checkout_head(root, sorted(from_git)))
    if from_cache:
        done = dvc(root, "checkout", "--quiet", *from_cache)
        _failed(
            "outputs DVC's cache holds", "dvc checkout --quiet", last_error(done) if done.returncode else None
        )
    still = [p for p in missing if not (root / p).exists()]
    if still:
        raise RestoreError(
            f"{still[0]}: not at HEAD and not in DVC's cache ({len(still)} such); rerun its stage (dvc repro)"
        )
    return {"restored_from_git": sorted(from_git), "restored_from_dvc_cache": from_cache}
