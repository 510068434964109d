"""The DVC stages, one module each: `run(params, [name,] paths)` loads inputs, calls the library,
writes the outputs and logs to MLflow. `main` is how dvc.yaml runs them:

    python -m rlvr.pipeline sft two_digit        # stage sft@two_digit
    python -m rlvr.pipeline passk                # stage passk

(`rlvr sft --run two_digit` is the same for people.) It loads and checks params.yaml, builds the
instance's params (`rlvr.pipeline.stageparams`: the keys it declares, and only those) and its paths
from `rlvr.pipeline.specs`, runs the stage module, copies the outputs git keeps into the
workspace's backup store (`rlvr.pipeline.backup`: what `rlvr restore` puts back before they are
committed) and prints a short summary (its headline numbers, the files it wrote). A user error is
one line on stderr and exit status 2.
"""

from __future__ import annotations

import importlib
import signal
import sys
from pathlib import Path
from typing import Any

from rlvr.determinism import check_device, thread_budget
from rlvr.fields import ConfigError, UserError
from rlvr.io.files import error_line
from rlvr.io.params import load_params
from rlvr.pipeline import backup, guard
from rlvr.pipeline.specs import STAGES, instance_outputs, instance_paths, kept_by_git, stage
from rlvr.pipeline.stageparams import stage_params
from rlvr.tasks import check_params


def run_stage(
    name: str, key: str | None, params_file: str = "params.yaml", progress: bool = True, watch: bool = False
) -> dict:
    """Run one stage instance in this process; returns its summary. `watch`: stop it when the `dvc`
    that started it is gone (`guard.watch_dvc`)."""
    spec = stage(name)
    if (spec.foreach is None) != (key is None):
        raise ConfigError(
            f"stage {name}: "
            + (
                f"name one entry of `{spec.foreach}` in params.yaml"
                if spec.foreach
                else "takes no instance name"
            )
        )
    params = load_params(params_file)
    check_params(params)  # what the stage would reject later, rejected before any work
    check_device(params.device)
    module = importlib.import_module(f"rlvr.pipeline.stages.{name}")
    scoped = stage_params(name, key, params)  # what the stage reads of params.yaml: what it declares
    paths = instance_paths(name, key, params)
    outputs = instance_outputs(name, key, params)
    if watch:
        guard.watch_dvc()
    guard.preflight(outputs)
    if name != "check":  # the guard does no work worth sharing cores over
        guard.warn_if_sharing(Path.cwd(), thread_budget(params.threads))

    with guard.outputs_or_nothing(outputs):
        args = (scoped, key, paths) if spec.foreach else (scoped, paths)
        result = module.run(*args, progress=progress)
    back_up(kept_by_git(name, key, params))
    return result


def back_up(outputs: list[Path]) -> None:
    """Copy a finished stage's git-kept outputs into the workspace's backup store, so `rlvr restore`
    finds them before they are committed. A copy that fails is a note, not the stage's failure: its
    outputs are written and whole."""
    try:
        backup.keep(Path.cwd(), outputs)
    except (OSError, UserError) as exc:
        print(
            f"rlvr: note: {error_line(exc)}; until its outputs are committed, `rlvr restore` cannot put "
            "them back",
            file=sys.stderr,
        )


def _interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m rlvr.pipeline", description="run one DVC stage of rlvr-repro")
    p.add_argument("stage", choices=list(STAGES))
    p.add_argument("key", nargs="?", default=None, help="the SFT run or variant (foreach stages)")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    guard.ignore_file_size_signal()
    for sig in (signal.SIGTERM, signal.SIGHUP):  # stopped like Ctrl-C: runs marked KILLED, outputs cleaned
        signal.signal(sig, _interrupt)
    try:
        result = run_stage(args.stage, args.key, args.params, progress=not args.quiet, watch=True)
    except Exception as exc:  # a user's error or a failed write (disk full, read-only): one line
        line = error_line(exc)
        if line is None:
            raise  # a bug: its traceback
        print(f"rlvr: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"rlvr: stage {args.stage}{'@' + args.key if args.key else ''} interrupted; the MLflow runs it "
            "opened are marked KILLED and its partial outputs removed",
            file=sys.stderr,
        )
        return 130
    written = instance_outputs(args.stage, args.key, load_params(args.params))
    print(summary(f"{args.stage}{'@' + args.key if args.key else ''}", result, written))
    return 0


SHOWN = 6  # numbers a stage's closing line names at most


def summary(name: str, result: Any, written: list[Path]) -> str:
    """A stage's closing lines for a person: its headline numbers (the first few scalars of what it
    returns), then the results and run record it wrote; the whole record stays in those files and
    in MLflow."""
    numbers = {
        k: v
        for k, v in (result.items() if isinstance(result, dict) else [])
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not k.endswith("_id")
    }
    shown = " · ".join(f"{k} {v:.4g}" for k, v in list(numbers.items())[:SHOWN])
    more = f" (+{len(numbers) - SHOWN} more)" if len(numbers) > SHOWN else ""
    files = [p.as_posix() for p in written if p.parts[:2] in (("reports", "metrics"), ("reports", "runs"))]
    return (
        f"rlvr: {name} done"
        + (f": {shown}{more}" if shown else "")
        + (f"\nrlvr: wrote {', '.join(files)} (every number: rlvr ui)" if files else "")
    )
