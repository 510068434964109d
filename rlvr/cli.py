"""`rlvr` command line: parses arguments, calls a stage or a tool, prints. Computes nothing.

User errors (bad params, missing or foreign inputs, an unreachable tracking server) print one line
on stderr and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rlvr.fields import UserError
from rlvr.io.files import error_line
from rlvr.io.params import load_params


class Text(str):
    """A result printed as it is, not as JSON."""


def _stage(args) -> dict:
    from rlvr.pipeline.run import run_stage

    key = next(
        (getattr(args, flag) for flag in ("run", "warmup", "variant") if getattr(args, flag, None)), None
    )
    return run_stage(args.command, key, args.params, progress=not args.quiet)


def _check(args) -> dict:
    from rlvr.determinism import check_device
    from rlvr.pipeline.probe import probe_store
    from rlvr.pipeline.store import public_uri, tracking_uri
    from rlvr.tasks import check_params
    from rlvr.tools.paramsfile import layout_problem, write_layout

    params = load_params(args.params)
    check_params(params)
    check_device(params.device)
    dropped = write_layout(args.params) if args.layout else []
    uri = tracking_uri()
    probe_store(uri)  # the store the stages will log to, asked what they will ask
    report = {
        "ok": True,
        "device": params.device,
        "tracking_store": public_uri(uri),
        "sft_runs": list(params.sft),
        "variants": list(params.variants),
        "layout": layout_problem(args.params) or "as `dvc exp run -S` writes it",
    }
    return report | ({"layout_dropped": dropped} if dropped else {})


def _pipeline(args):
    from rlvr.pipeline import dvcfile

    if args.plots_page:
        from rlvr.pipeline import plotpage

        return {"written": str(plotpage.write())}
    folder = dvcfile.profile_folder(args.profile)
    if args.write:
        return {"written": str(dvcfile.write(folder))}
    return Text(dvcfile.render(folder / "params.yaml"))


def _provenance(args):
    from rlvr.pipeline.provenance import explain, format_explain
    from rlvr.pipeline.store import tracking_uri

    info = explain(Path.cwd(), args.path, check_stale=not args.no_status, mlflow_uri=tracking_uri())
    return info if args.json else Text(format_explain(info))


def _diff(args):
    from rlvr.pipeline import paths
    from rlvr.pipeline.provenance import ProvenanceError, load_lock
    from rlvr.pipeline.stages.report import variant_configs
    from rlvr.report.compare import diff_variants, format_diff

    try:  # the settings each variant's stage ran with: dvc.lock's record of them
        configs = variant_configs(load_lock(Path.cwd()))
    except ProvenanceError:
        configs = None  # no dvc.lock: the table says nothing of settings
    d = diff_variants(
        paths.METRICS, paths.PASSK_COUNTS, args.a, args.b, configs, variant_machines(args.a, args.b)
    )
    if not args.json:
        return Text(format_diff(d))  # warnings are its first lines
    for w in d["warnings"]:
        print(f"rlvr: warning: {w}", file=sys.stderr)
    return d


def variant_machines(*variants: str) -> dict[str, str | None]:
    """The CPU each variant's GRPO stage ran on, from its run record (None where it does not say or
    there is none; a damaged record is the one-line error of `read_json`)."""
    from rlvr.io.files import read_json
    from rlvr.pipeline import paths
    from rlvr.pipeline.records import record_path

    out = {}
    for v in variants:
        path = record_path(paths.METRICS / f"grpo-{v}.json")
        record = read_json(path) if path.is_file() else {}
        made = record.get("made") if isinstance(record, dict) else None
        out[v] = made.get("cpu") if isinstance(made, dict) else None
    return out


def _summary(args):
    from rlvr.pipeline import paths
    from rlvr.report.summary import summary

    return Text(summary(paths.REPORTS))


def _plan(args):
    from rlvr.report.inputs import read_metrics_dir
    from rlvr.report.summary import power_table

    return Text(power_table(read_metrics_dir(Path(args.metrics)), Path(args.claims), Path(args.plan)))


def _sweep_report(args) -> dict:
    import yaml

    from rlvr.io.dvcinfo import experiments
    from rlvr.pipeline.dvcfile import params_feeding
    from rlvr.report.sweep import sweep_report, with_results

    lock = Path("dvc.lock")
    feeding = params_feeding("passk", yaml.safe_load(lock.read_text())) if lock.exists() else None
    return sweep_report(with_results(experiments()), Path(args.out), feeding)


def _starts(args) -> dict:
    from rlvr.tools.starts import rescore_starts, run_starts

    if args.rescore:
        return rescore_starts(load_params(args.params))
    return run_starts(load_params(args.params))


def _calibrate(args) -> dict:
    from rlvr.tools.calibrate import run_calibrate

    which = tuple(args.only or ("grpo_end", "hack_temperature"))
    return run_calibrate(load_params(args.params), which, Path(args.plan))


SHOWN = 8  # problems printed per failed check


class VerifyFailed(UserError):
    """A committed result is not what the committed code produces (the lines above say which)."""


def _restore(args) -> dict:  # noqa: ARG001
    from rlvr.tools.restore import restore

    return restore(Path.cwd())


def _verify(args) -> Text:
    from rlvr.pipeline.paths import RERUNS
    from rlvr.report.moves import said
    from rlvr.tools import rerun

    root = Path.cwd()
    for flag, given in (("--perturb", args.perturb), ("--keep-clone", args.keep_clone)):
        if given and not args.rerun:
            raise UserError(f"{flag}: only with --rerun (rlvr verify --rerun {flag} ...)")
    if args.rerun:
        keep = Path(args.keep_clone) if args.keep_clone else None
        if keep is not None and keep.exists():
            raise UserError(f"--keep-clone {keep}: already exists; name a new folder")
        record = rerun.rerun_in_clone(root, args.perturb, keep)
        rerun.write_record(root / RERUNS, "perturbed" if args.perturb else "rerun", record)
        how = f" with {record['perturbation']}" if record["perturbation"] else ""
        print("\n".join(said(record, f"a fresh clone of {record['commit'][:10]}{how}, against its commit")))
        if record["word"] == "moved":
            raise VerifyFailed(f"a verdict flipped between reproduced and differs (recorded in {RERUNS})")
        return Text(f"{record['word']} (recorded in {RERUNS})")
    from rlvr.tools.verify import verify

    results = verify(root)
    lines = [f"{'ok  ' if not problems else 'FAIL'}  {name}" for name, problems in results.items()]
    for name, problems in results.items():
        lines += [f"rlvr verify: {name}: {p}" for p in problems[:SHOWN]]
        if len(problems) > SHOWN:
            lines.append(f"rlvr verify: {name}: ... and {len(problems) - SHOWN} more")
    against = rerun.workspace_against_head(root)
    if against is not None:
        lines += said(against, f"the workspace's results against HEAD's ({against['commit']})")
    print("\n".join(lines))
    failed = [name for name, problems in results.items() if problems]
    if failed:
        raise VerifyFailed(f"{len(failed)} of {len(results)} checks failed: {', '.join(failed)}")
    if against is not None and against["word"] == "moved":
        raise VerifyFailed("a verdict flipped between reproduced and differs against HEAD")
    seen = "" if against is None else f"; results {against['word']}"
    return Text(f"all {len(results)} checks hold{seen}")


def _ui(args) -> Text:
    from rlvr.fields import ConfigError
    from rlvr.tools.ui import serve

    try:
        n = load_params(args.params).passk.n  # the pass@n column the view shows
    except ConfigError:
        n = 64
    return Text(serve(Path.cwd(), args.port, args.host, n))


def _bench(args) -> dict:
    from rlvr.bench.suite import bench_all

    return bench_all(
        load_params(args.params), Path(args.out), only=args.only, peer=args.peer, against=args.against
    )


STAGE_HELP = {
    "data": (None, "stage data: every SFT run's noisy labels and the held-out problems"),
    "warmup": ("--warmup", "stage warmup@NAME: the clean epochs the SFT runs naming it start from"),
    "sft": ("--run", "stage sft@RUN: supervised fine-tuning from its warm-up, and its metrics"),
    "grpo": ("--variant", "stage grpo@VARIANT: GRPO from the SFT checkpoint, every seed"),
    "passk": (None, "stage passk: n-sample pass@k of SFT and every variant on held-out problems"),
    "hack": (None, "stage hack: GRPO on a hackable substring verifier, every seed"),
    "worked": (None, "stage worked: every closed-form chapter number, with figures"),
    "report": (None, "stage report: claims vs measured values -> reports/report.md/.html"),
}


def _command(sub, fn, name: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand `name` that runs `fn(args)`."""
    s = sub.add_parser(name, **kwargs)
    s.set_defaults(fn=fn)
    return s


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rlvr", description=__doc__.splitlines()[0])
    p.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    sub = p.add_subparsers(dest="command", required=True)

    s = _command(
        sub,
        _check,
        "check",
        help="validate params.yaml and ask the MLflow store what a stage will (the guard's checks)",
    )
    s.add_argument(
        "--layout",
        action="store_true",
        help="write the params file in the layout `dvc exp run -S` writes (same values), so that an "
        "experiment's diff shows only the keys it sets",
    )
    for name, (flag, text) in STAGE_HELP.items():
        s = _command(sub, _stage, name, help=text)
        if flag:
            table = {"--run": "sft", "--warmup": "warmups", "--variant": "variants"}[flag]
            s.add_argument(flag, required=True, help=f"an entry under `{table}` in params.yaml")
        s.add_argument("--quiet", action="store_true", help="no progress bars")
    s = _command(
        sub,
        _pipeline,
        "pipeline",
        help="print dvc.yaml as rlvr/pipeline/specs.py defines it (--write: replace it)",
    )
    s.add_argument("--write", action="store_true")
    s.add_argument(
        "--profile", help="a params profile's folder (e.g. powered): its dvc.yaml, from its params.yaml"
    )
    s.add_argument(
        "--plots-page",
        action="store_true",
        help="rewrite .dvc/plots/offline.html, the offline page `dvc plots show` fills (needs '.[plots]')",
    )
    s = _command(
        sub, _provenance, "provenance", help="which stage, params, inputs and MLflow runs produced PATH"
    )
    s.add_argument("path", help="a figure, metrics file or other output recorded in dvc.lock")
    s.add_argument("--no-status", action="store_true", help="skip the `dvc status` staleness check")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s = _command(
        sub,
        _diff,
        "diff",
        help="two GRPO variants side by side: final metrics, pass@k, a paired test, the settings they "
        "differ in and a one-line verdict per headline metric",
    )
    s.add_argument("a", help="variant A, the reference (a name under `variants:` with results, e.g. grpo)")
    s.add_argument("b", help="variant B, compared with A: every difference is B - A (e.g. dr_grpo)")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s = _command(
        sub, _summary, "summary", help="verdict counts and one line per GRPO variant, in one terminal screen"
    )
    s = _command(
        sub,
        _plan,
        "plan",
        help="every measured claim's precision on a set of results read as a pilot: half-width, "
        "target and the chains that would meet it",
    )
    s.add_argument("--metrics", default="reports/metrics", help="the pilot's metrics folder")
    s.add_argument("--claims", default="experiments/claims.yaml", help="the claims registry")
    s.add_argument(
        "--plan", default="experiments/plan.yaml", help="the plan whose second looks set claims' levels"
    )
    s = _command(
        sub,
        _sweep_report,
        "sweep-report",
        help="pass@1, pass@64, never solved and crossover across queued experiments",
    )
    s.add_argument("--out", default="reports/sweep", help="folder for sweep.md, sweep.png and sweep.svg")
    s = _command(
        sub,
        _starts,
        "starts",
        help="chapter B's candidate SFT starts side by side (SFT side, then GRPO) -> reports/starts.json",
    )
    s.add_argument(
        "--rescore",
        action="store_true",
        help="recompute the summaries from the counts starts.json stores (no training)",
    )
    s = _command(
        sub,
        _calibrate,
        "calibrate",
        help="the declared calibrations of experiments/calibration.yaml on validation values "
        "(chapter B's GRPO recipe, the hack's temperature) -> reports/calibration/",
    )
    s.add_argument(
        "--only",
        action="append",
        choices=("grpo_end", "hack_temperature"),
        help="run this calibration only (repeatable; default: both)",
    )
    s.add_argument("--plan", default="experiments/calibration.yaml", help="the declared calibrations")
    s = _command(
        sub,
        _restore,
        "restore",
        help="bring every output back to the bytes dvc.lock records (DVC removes a stage's outputs "
        "before it runs it): checkpoints from DVC's cache, checked first; git-kept ones from the "
        "commit that recorded them; what neither holds is named with the stage to rerun",
    )
    s = _command(
        sub,
        _verify,
        "verify",
        help="check that the committed results are what the committed code produces, and say how the "
        "workspace's results compare with HEAD's: identical, statistically the same or moved (CI runs it)",
    )
    s.add_argument(
        "--rerun",
        action="store_true",
        help="rerun the whole pipeline in a fresh clone of HEAD and compare its results with the "
        "committed ones (as long as the pipeline; recorded in reports/rerun.json)",
    )
    s.add_argument(
        "--perturb",
        action="store_true",
        help="with --rerun: every chain's initial weights perturbed by float32-rounding-sized amounts "
        "(RLVR_PERTURB=1e-6), as another CPU would",
    )
    s.add_argument(
        "--keep-clone",
        default=None,
        metavar="DIR",
        help="with --rerun: move the clone and its results to DIR instead of deleting it",
    )
    s = _command(
        sub,
        _ui,
        "ui",
        help="the MLflow UI on this checkout's mlflow.db; prints the URL of its runs table (Ctrl-C stops)",
    )
    s.add_argument("--port", type=port_number, default=5000, help="port to serve on (default: 5000)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    s = _command(sub, _bench, "bench", help="speed/memory benchmarks -> reports/benchmarks.json")
    s.add_argument("--out", default="reports/benchmarks.json")
    s.add_argument("--only", nargs="*", default=None, help="names of benchmarks to run (default: all)")
    s.add_argument(
        "--peer",
        default=None,
        metavar="trl",
        help="also measure TRL's GRPOTrainer and HF generate on the same workloads, each alone and "
        "at its best (needs pip install -e '.[peer]')",
    )
    s.add_argument(
        "--against",
        default=None,
        metavar="REV",
        help="with --only pipeline: first measure commit REV (the previous main, say) the same way, "
        "back to back on this machine",
    )
    return p


def find_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` holding dvc.yaml and params.yaml: this repository."""
    for folder in (start, *start.parents):
        if (folder / "dvc.yaml").is_file() and (folder / "params.yaml").is_file():
            return folder
    return None


def _root_relative(path: Path, root: Path) -> str:
    """A path the user named from a subfolder, as the project names it (from the root)."""
    resolved = path.resolve()
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(resolved)


def port_number(text: str) -> int:
    """A TCP port a server may listen on (1-65535), for argparse: anything else is its usage error."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (1-65535)")
    return port


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not Path(args.params).is_absolute() and Path(args.params).exists():
        args.params = str(Path(args.params).resolve())  # a --params given from here stays this file
    cwd = Path.cwd()
    root = find_root(cwd)
    if root is not None and root != cwd:
        if getattr(args, "path", None) and not Path(args.path).is_absolute():  # named from here
            args.path = _root_relative(cwd / args.path, root)
        os.chdir(root)  # from a subfolder, as from the root: every path in the project is root-relative
    outside = (
        ""
        if root is not None
        else f" (no rlvr-repro checkout at or above {cwd}: run rlvr inside the repository)"
    )
    try:
        result = args.fn(args)
    except Exception as exc:  # a user's error, or a failed read or write however raised: one line
        line = error_line(exc)
        if line is None:
            raise  # a bug: its traceback
        where = outside if isinstance(exc, UserError | FileNotFoundError) else ""
        print(f"rlvr: error: {line}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rlvr: interrupted", file=sys.stderr)
        return 130
    print(result if isinstance(result, Text) else json.dumps(result, indent=2, sort_keys=True, default=str))
    return 0
