"""What git says about the checkout and what it does to one: the commit, whether a file differs
from it ("dirty": `code_version`, the one definition), HEAD's files, a clone. Every git command the
package runs is here."""

from __future__ import annotations

import subprocess
from pathlib import Path

# What decides how a result is made: the code, the claims, the settings, the pipeline, the pins.
CODE_PATHS = ("rlvr", "experiments", "params.yaml", "dvc.yaml", "pyproject.toml")


def _git(root: Path, *args: str) -> str | None:
    """git's stdout, stripped; None when git is missing, fails or hangs."""
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def ignored(root: Path, path: str) -> bool:
    """True for a path git ignores (a DVC-cached output: DVC, not git, holds its committed version)."""
    try:
        out = subprocess.run(["git", "check-ignore", "-q", path], cwd=root, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def resolve(root: Path, rev: str) -> str | None:
    """`rev` as a full commit id, or None where the checkout has no such commit."""
    return _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")


def clone(source: Path, into: Path, rev: str | None = None) -> None:
    """A fresh clone of `source` at `into`, at `rev` (detached) when given; raises on failure."""
    subprocess.run(["git", "clone", "--quiet", str(source), str(into)], check=True)
    if rev is not None:
        subprocess.run(["git", "checkout", "--quiet", "--detach", rev], cwd=into, check=True)


def tracked_in_head(root: Path, paths: list[str]) -> set[str]:
    """Those of `paths` HEAD holds (a file, or a folder with files in it)."""
    out = _git(root, "ls-tree", "-r", "--name-only", "HEAD", "--", *paths) if paths else None
    files = out.splitlines() if out else []
    return {p for p in paths if any(f == p or f.startswith(p.rstrip("/") + "/") for f in files)}


def checkout_head(root: Path, paths: list[str]) -> str | None:
    """Put HEAD's version of `paths` back in the working tree: None, or git's last line of error."""
    run = subprocess.run(["git", "checkout", "HEAD", "--", *paths], cwd=root, capture_output=True, text=True)
    return (
        None if run.returncode == 0 else (run.stderr.strip().splitlines() or [f"exit {run.returncode}"])[-1]
    )


def history(root: Path, path: str, most: int = 200) -> list[str]:
    """The commits that touched `path`, newest first (at most `most`); [] outside git."""
    out = _git(root, "log", f"--max-count={most}", "--format=%H", "--", path)
    return out.splitlines() if out else []


def committed_bytes(root: Path, rev: str, path: str) -> bytes | None:
    """The bytes of `path` as commit `rev` holds it; None where it holds no such file."""
    try:
        out = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def export_committed(root: Path, into: Path, *paths: str, rev: str = "HEAD") -> bool:
    """Commit `rev`'s version of `paths` (files or folders), written under `into` at the same
    relative paths; False outside git or where the commit lacks one of them."""
    import io
    import tarfile

    try:
        out = subprocess.run(
            ["git", "archive", "--format=tar", rev, "--", *paths],
            cwd=root,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    if out.returncode != 0:
        return False
    with tarfile.open(fileobj=io.BytesIO(out.stdout)) as archive:
        archive.extractall(into, filter="data")
    return True


def git_commit(root: Path, path: str | None = None, short: bool = False) -> str:
    """HEAD's commit, or with `path` the last commit that touched it ("unknown" outside a git checkout,
    "uncommitted" for a path git has never seen); `short`: as git abbreviates it (`short_commit`)."""
    if path is None:
        return _git(root, "rev-parse", *(("--short",) if short else ()), "HEAD") or "unknown"
    out = _git(root, "log", "-1", f"--format={'%h' if short else '%H'}", "--", path)
    return "unknown" if out is None else (out or "uncommitted")


def differs_from_commit(root: Path, path: str) -> bool | None:
    """True if the file in the working tree differs from HEAD's (or is untracked); None outside git."""
    if _git(root, "rev-parse", "HEAD") is None:
        return None
    tracked = _git(root, "ls-files", "--error-unmatch", path)
    if tracked is None:
        return True
    return bool(_git(root, "status", "--porcelain", "--", path))


def committed_text(root: Path, path: str) -> str | None:
    """HEAD's version of a file, or None outside git or where HEAD has no such file."""
    return _git(root, "show", f"HEAD:{path}") or None


def code_version(root: Path) -> dict:
    """The code that runs in `root`: HEAD's commit ("unknown" outside git), whether the code and
    settings (CODE_PATHS) differ from it (`dirty`; None outside git) and which files do (`changed`).
    What every trail of a result names: its MLflow run, its run record, its figures' metadata."""
    changed = uncommitted(root, CODE_PATHS)
    return {
        "commit": git_commit(root),
        "dirty": None if changed is None else bool(changed),
        "changed": changed or [],
    }


def short_commit(root: Path, rev: str = "HEAD") -> str:
    """`rev` (HEAD by default) as git abbreviates it: `core.abbrev` digits where the repository sets
    it, else as many as keep it unambiguous."""
    return _git(root, "rev-parse", "--short", rev) or "unknown"


def uncommitted(root: Path, paths: tuple[str, ...]) -> list[str] | None:
    """The paths under `paths` that differ from HEAD or are untracked; None outside git."""
    out = _git(root, "status", "--porcelain", "--", *paths)
    # "XY path" per line; _git strips the first line's leading space, so split rather than slice
    return None if out is None else [line.split(None, 1)[1] for line in out.splitlines() if line.strip()]


def committed_md5s(root: Path, commit: str, paths: list[str]) -> dict[str, str | None] | None:
    """The md5 of each file as `commit` holds it (what DVC records for a dep: the bytes' md5), None
    for a path the commit lacks; None outside git. One `git cat-file --batch` for all of them."""
    import hashlib

    query = "".join(f"{commit}:{p}\n" for p in paths).encode()
    try:
        out = subprocess.run(
            ["git", "cat-file", "--batch"], cwd=root, input=query, capture_output=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    found: dict[str, str | None] = {}
    data, at = out.stdout, 0
    for path in paths:  # per object: "<sha> blob <size>\n<bytes>\n", or "<name> missing\n"
        end = data.index(b"\n", at)
        header = data[at:end].split()
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            found[path] = hashlib.md5(data[end + 1 : end + 1 + size]).hexdigest()
            at = end + 1 + size + 1
        else:
            found[path] = None
            at = end + 1
    return found
