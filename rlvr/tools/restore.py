"""`rlvr restore`: every output back to the bytes dvc.lock records for it.

DVC removes a stage's outputs before it runs the stage's command, so a stage that fails after the
guard passed (a fault no check foresees: a server that dies mid-stage, a killed process) leaves
them missing, or half there (a checkpoint folder with the killed run's first new file). dvc.lock
still records what each output was. This asks DVC which outputs are not what it records (`dvc
status`: deleted, modified, or a cached object that is missing), and brings each back to those
bytes: a cached output (checkpoints) from DVC's cache, each object's md5 checked first (a damaged
object is never put back), through `dvc checkout`, which compares a folder file by file; an output
git keeps (metrics, curves, figures) from the newest commit whose dvc.lock records the same hash
for it, or, where no commit holds those bytes yet (a repro not committed, its next run killed),
from the workspace's backup store (`rlvr.pipeline.backup`: every stage copies its git-kept outputs
there as it finishes; each object's md5 checked before it is put back). An output whose bytes are
in none of them is named, with the stage to rerun. An output that is what dvc.lock records is left
as it is, and so is every stage whose params or code changed (that is a rerun's business, not a
restore's). Every path is the working folder's: run from a profile's folder (`cd powered && rlvr
restore`), it restores that profile's outputs (and reads its own backup store) to its dvc.lock.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from rlvr.fields import UserError
from rlvr.io.dvcinfo import last_error
from rlvr.io.dvcinfo import run as dvc
from rlvr.io.dvcinfo import status as dvc_status
from rlvr.io.files import md5
from rlvr.io.gitinfo import committed_bytes, differs_from_commit, export_committed, history
from rlvr.pipeline import backup
from rlvr.pipeline.provenance import load_lock


class RestoreError(UserError):
    """An output could not be put back (one line naming it and what to run)."""


@dataclass(frozen=True)
class Changed:
    """An output that is not what dvc.lock records: its stage, path, DVC's word for it (deleted,
    modified, not in cache) and dvc.lock's entry for it (its md5)."""

    stage: str
    path: str
    why: str
    entry: dict


def changed_outputs(root: Path) -> list[Changed]:
    """The outputs `dvc status` finds changed against dvc.lock, in dvc.lock's order."""
    status = dvc_status(root)
    if "dvc status" in status:
        raise RestoreError(f"dvc status {status['dvc status'][0]}")
    found = []
    for stage, body in load_lock(root).items():
        said = {}
        for item in status.get(stage, []):
            if isinstance(item, dict):
                said.update(item.get("changed outs", {}))
        for entry in body.get("outs", []):
            path = entry["path"]
            why = said.get(path) or said.get(path.rstrip("/"))
            if why:
                found.append(Changed(stage, path, why, entry))
    return found


def _object(cache: Path, digest: str) -> Path:
    """Where DVC's cache keeps the object of `digest` (files/md5/ab/cdef...: its documented layout)."""
    return cache / "files" / "md5" / digest[:2] / digest[2:]


def damaged_object(cache: Path, out: Changed) -> str | None:
    """None where the cache holds the output's object whole, each file's md5 as recorded; else the
    first file (the output's path, or a file in its folder) that is missing or damaged there."""
    digest = out.entry.get("md5") or ""
    obj = _object(cache, digest)
    if not obj.is_file() or md5(obj) != digest.removesuffix(".dir"):
        return out.path
    if not digest.endswith(".dir"):
        return None
    for item in json.loads(obj.read_text()):  # a folder's listing: [{"md5": ..., "relpath": ...}]
        part = _object(cache, item["md5"])
        if not part.is_file() or md5(part) != item["md5"]:
            return f"{out.path.rstrip('/')}/{item['relpath']}"
    return None


def lock_history(root: Path) -> list[tuple[str, dict]]:
    """(commit, its dvc.lock's stages) for every commit that changed dvc.lock, newest first; read
    once for all the outputs a restore looks up (a lock git cannot parse is passed over)."""
    found = []
    for commit in history(root, "dvc.lock"):
        try:
            stages = (yaml.safe_load(committed_bytes(root, commit, "./dvc.lock") or b"") or {}).get("stages")
        except yaml.YAMLError:
            continue
        if isinstance(stages, dict):
            found.append((commit, stages))
    return found


def recorded_in(root: Path, out: Changed, locks: list[tuple[str, dict]]) -> str | None:
    """The newest commit whose dvc.lock (`locks`: `lock_history`) records the same hash for this
    output (so its tree holds those bytes, committed with it); for a file, its bytes there are
    checked too. None: no commit."""
    for commit, stages in locks:
        entries = (stages.get(out.stage) or {}).get("outs", [])
        if not any(e.get("path") == out.path and e.get("md5") == out.entry.get("md5") for e in entries):
            continue
        if out.entry.get("md5", "").endswith(".dir"):
            return commit
        data = committed_bytes(root, commit, f"./{out.path}")
        if data is not None and hashlib.md5(data).hexdigest() == out.entry.get("md5"):
            return commit
    return None


def put_back_committed(root: Path, out: Changed, commit: str) -> None:
    """Replace the output (file or folder) with the commit's version of it."""
    target = root / out.path
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        if not export_committed(root, Path(tmp), out.path.rstrip("/"), rev=commit):
            raise RestoreError(
                f"{out.path}: commit {commit[:10]} lacks it; rerun its stage: dvc repro {out.stage}"
            )
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        (Path(tmp) / out.path.rstrip("/")).replace(target)


def from_cache(root: Path, cache: Path, out: Changed) -> str | None:
    """Put a cached output back through `dvc checkout`, its object checked first: None, or why not."""
    bad = damaged_object(cache, out)
    if bad is not None:
        return f"{bad}: missing or damaged in DVC's cache"
    done = dvc(root, "checkout", "--force", "--quiet", out.path)
    return None if done.returncode == 0 else f"{out.path}: dvc checkout failed ({last_error(done)})"


def from_backup(root: Path, out: Changed) -> str | None:
    """Put a git-kept output back from the backup store, its objects checked first: None, or why not."""
    try:
        if backup.put_back(root, out.path, out.entry.get("md5") or ""):
            return None
    except backup.BackupError as exc:
        return str(exc)
    return (
        f"{out.path}: no commit holds the bytes dvc.lock records (not committed yet), "
        f"nor does the backup store ({backup.STORE})"
    )


def restore(root: Path) -> dict:
    """Every output that is not what dvc.lock records, back to those bytes: cached ones from DVC's
    cache (checked first), git-kept ones from the commit that recorded them, or else from the
    backup store (checked first). Raises one line naming each output that could not be found, and
    the stages to rerun."""
    changed = changed_outputs(root)
    where = dvc(root, "cache", "dir")
    if where.returncode != 0:
        raise RestoreError(f"dvc cache dir failed: {last_error(where)}")
    cache = Path(where.stdout.strip())
    cached, from_git, kept, lost, unfetched = [], {}, [], {}, []
    locks: list | None = None  # dvc.lock's history, read once when a git-kept output needs it
    for out in changed:
        obj = _object(cache, out.entry.get("md5") or "x")
        if out.why == "not in cache" or obj.exists():
            if not obj.is_file():  # never in this cache
                unfetched.append(out.path)
                continue
            why = from_cache(root, cache, out)
            if why is None:
                cached.append(out.path)
            else:
                lost[out.path] = (out.stage, why)
            continue
        locks = lock_history(root) if locks is None else locks
        commit = recorded_in(root, out, locks)
        if commit is None:
            why = from_backup(root, out)
            if why is None:
                kept.append(out.path)
            else:
                lost[out.path] = (out.stage, why)
            continue
        put_back_committed(root, out, commit)
        from_git[out.path] = commit
    if lost:
        stages = sorted({stage for stage, _ in lost.values()})
        _, why = next(iter(lost.values()))
        raise RestoreError(
            why
            + (f" (and {len(lost) - 1} more)" if len(lost) > 1 else "")
            + f"; rerun what made them: dvc repro {' '.join(stages)}"
        )
    still = [c.path for c in changed_outputs(root) if c.path not in unfetched]
    if still:
        raise RestoreError(
            f"{still[0]}: still not what dvc.lock records after the restore ({len(still)} such)"
        )
    done: dict = {"restored_from_dvc_cache": cached, "restored_from_git": from_git}
    if kept:
        done["restored_from_backup"] = kept
    if unfetched:  # a clone that never pulled them: nothing was lost here
        done["not_in_this_cache"] = {
            "outputs": unfetched,
            "note": "this workspace never had them (no DVC remote pulled, or never built): "
            "`dvc pull` or `dvc repro` makes them",
        }
    if (root / "params.yaml").is_file() and differs_from_commit(root, "params.yaml"):
        done["params_yaml"] = (
            "differs from HEAD (a `dvc exp run -S` writes its values there and leaves them when the "
            "experiment fails); restore leaves it: `git checkout params.yaml` undoes it"
        )
    return done
