"""What DVC says about the checkout, and what it is asked to do, through its command line (DVC has
no public Python API for these). Every DVC command the package runs is here; each runs this
interpreter's DVC (`python -m dvc`), so an unactivated virtual environment works."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rlvr.fields import UserError

DVC = (sys.executable, "-m", "dvc")


def run(root: Path | None, *args: str, env: dict | None = None, timeout: float | None = None):
    """`dvc ARGS` in `root` (None: the working folder), its output captured as text: the completed
    process, whatever its exit code (the caller decides what a failure means)."""
    return subprocess.run([*DVC, *args], cwd=root, env=env, capture_output=True, text=True, timeout=timeout)


def last_error(done) -> str:
    """The last line DVC wrote to stderr (its error), or the exit code when it wrote none."""
    return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]


def must(root: Path | None, *args: str, env: dict | None = None) -> str:
    """`dvc ARGS`, its stdout; a failure raises RuntimeError with DVC's last line."""
    done = run(root, *args, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"dvc {' '.join(args[:2])} failed: {last_error(done)}")
    return done.stdout


def repro_stream(root: Path, args: list[str], env: dict, stderr) -> subprocess.Popen:
    """`dvc ARGS` started in `root`, its stdout a line-buffered text pipe (read it as it runs), its
    stderr to the file `stderr`."""
    return subprocess.Popen(
        [*DVC, *args], cwd=root, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True, bufsize=1
    )


def experiments() -> list:
    """`dvc exp show --json` of the checkout in the working folder: every experiment's params and
    metrics; one line naming DVC's own error when it fails."""
    shown = run(None, "exp", "show", "--json")
    if shown.returncode != 0:
        raise UserError(f"dvc exp show failed: {last_error(shown)}")
    return json.loads(shown.stdout)


def status(root: Path) -> dict:
    """`dvc status --json`: each changed stage and why; {"dvc status": [why]} when DVC fails."""
    done = run(root, "status", "--json")
    if done.returncode != 0:
        return {"dvc status": [f"failed: {last_error(done)}"]}
    return json.loads(done.stdout or "{}")


def stage_status(root: Path, name: str) -> dict | str:
    """`dvc status <name> --json`: what changed for that stage since dvc.lock was written ({} when
    nothing did), or, when DVC could not answer, why not in words."""
    try:
        done = run(root, "status", name, "--json", timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"dvc status failed: {exc}"
    if done.returncode != 0:
        return last_error(done) if done.stderr.strip() else "dvc status failed"
    try:
        return json.loads(done.stdout or "{}")
    except json.JSONDecodeError:
        return "dvc status said something other than JSON"
