"""`rlvr restore`: the outputs a failed stage left missing, back as the last `dvc repro` recorded them.

DVC removes a stage's outputs before it runs the stage's command, so a stage that fails after the
guard passed (a fault no check foresees: a server that dies mid-stage, a killed process) leaves
them missing, the git-tracked metrics, curves and figures among them. They are not lost: the ones
git tracks are at HEAD, the rest (checkpoints) in DVC's cache under the hashes dvc.lock records.
This puts back every output dvc.lock records that the workspace lacks, and only those: an output
that is there, changed or not, is left as it is.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from rlvr.fields import UserError
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


def _git_tracked(root: Path, paths: list[str]) -> set[str]:
    """Those of `paths` HEAD holds (a file, or a folder with files in it)."""
    if not paths:
        return set()
    run = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "HEAD", "--", *paths],
        cwd=root,
        capture_output=True,
        text=True,
    )
    files = run.stdout.splitlines() if run.returncode == 0 else []
    return {p for p in paths if any(f == p or f.startswith(p.rstrip("/") + "/") for f in files)}


def _run(root: Path, command: list[str], what: str) -> None:
    run = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or [f"exit {run.returncode}"])[-1]
        raise RestoreError(f"{what}: `{' '.join(command[:3])} ...` failed ({last})")


def restore(root: Path) -> dict:
    """Put back every missing output: git-tracked ones from HEAD, the others from DVC's cache."""
    missing = missing_outputs(root)
    from_git = _git_tracked(root, missing)
    from_cache = [p for p in missing if p not in from_git]
    if from_git:
        _run(root, ["git", "checkout", "HEAD", "--", *sorted(from_git)], "outputs git tracks")
    if from_cache:
        _run(root, ["dvc", "checkout", "--quiet", *from_cache], "outputs DVC's cache holds")
    still = [p for p in missing if not (root / p).exists()]
    if still:
        raise RestoreError(
            f"{still[0]}: not at HEAD and not in DVC's cache ({len(still)} such); rerun its stage (dvc repro)"
        )
    return {"restored_from_git": sorted(from_git), "restored_from_dvc_cache": from_cache}
