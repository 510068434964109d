"""`rlvr` command line: parses arguments, calls one library function, prints. Computes nothing.

User errors (bad params, missing inputs, an unreachable tracking server) print one line on stderr
and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlvr.config import ConfigError, load_params


def _data(args) -> dict:
    from rlvr.sft import run_data

    params = load_params(args.params)
    params.sft_run(args.run)
    return run_data(params, args.run, Path("data") / args.run)


def _sft(args) -> dict:
    from rlvr.sft import run_sft

    params = load_params(args.params)
    params.sft_run(args.run)
    d = Path("data") / args.run
    return run_sft(params, args.run, d, d / "sft.pt", Path("reports/metrics") / f"sft-{args.run}.json",
                   Path("reports/curves") / f"sft-{args.run}.tsv", progress=not args.quiet)


def _grpo(args) -> dict:
    from rlvr.grpo import run_grpo

    params = load_params(args.params)
    params.variant(args.variant)
    return run_grpo(params, args.variant, Path("data/grpo") / args.variant,
                    Path("reports/metrics") / f"grpo-{args.variant}.json",
                    Path("reports/curves/grpo") / args.variant, progress=not args.quiet)


def _passk(args) -> dict:
    from rlvr.passk import run_passk

    return run_passk(load_params(args.params), Path("reports/passk-counts.json"), Path("reports/metrics/passk.json"),
                     Path("reports/curves/passk.tsv"), Path("reports/figures"))


def _hack(args) -> dict:
    from rlvr.hack import run_hack

    return run_hack(load_params(args.params), Path("data/hack"), Path("reports/metrics/hack.json"),
                    Path("reports/hack-samples.json"), Path("reports/curves/hack"),
                    Path("reports/figures/hack-reward-vs-accuracy.png"), progress=not args.quiet)


def _worked(args) -> dict:
    from rlvr.config import ConfigError
    from rlvr.runtime import set_determinism
    from rlvr.worked import run_worked

    params = load_params(args.params)
    if params.worked is None:
        raise ConfigError("worked: missing section in params.yaml (the worked stage reads it)")
    set_determinism(params.worked.seed, params.threads)
    metrics = run_worked(params.worked, Path("reports/metrics/worked.json"), Path("reports/figures"))
    return {"examples": sorted(metrics)}


def _report(args) -> dict:
    from rlvr.report import run_report

    root = Path.cwd()
    return run_report(root, Path("experiments/claims.yaml"), Path("reports/metrics"), Path("reports/figures"),
                      Path("reports"), Path("reports/hack-samples.json"), Path("reports/benchmarks.json"))


def _provenance(args):
    from rlvr.provenance import explain

    return explain(Path.cwd(), args.path, check_stale=not args.no_status)


def _diff(args):
    from rlvr.report import diff_variants, format_diff

    d = diff_variants(Path("reports/metrics"), Path("reports/passk-counts.json"), args.a, args.b)
    return d if args.json else Text(format_diff(d))


class Text(str):
    """A result printed as it is, not as JSON."""


def _bench(args) -> dict:
    from rlvr.bench import run_bench

    return run_bench(load_params(args.params), Path(args.out), only=args.only)


def _check(args) -> dict:
    params = load_params(args.params)
    return {"ok": True, "sft_runs": list(params.sft), "variants": list(params.variants)}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rlvr", description=__doc__.splitlines()[0])
    p.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("check", help="validate params.yaml and exit")
    s.set_defaults(fn=_check)
    s = sub.add_parser("data", help="stage data@RUN: noisy SFT set and held-out problems")
    s.add_argument("--run", required=True, help="an entry under `sft` in params.yaml")
    s.set_defaults(fn=_data)
    s = sub.add_parser("sft", help="stage sft@RUN: supervised fine-tuning and its metrics")
    s.add_argument("--run", required=True, help="an entry under `sft` in params.yaml")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(fn=_sft)
    s = sub.add_parser("grpo", help="stage grpo@VARIANT: GRPO from the SFT checkpoint, every seed")
    s.add_argument("--variant", required=True, help="an entry under `variants` in params.yaml")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(fn=_grpo)
    s = sub.add_parser("passk", help="stage passk: n-sample pass@k of SFT and every variant on held-out problems")
    s.set_defaults(fn=_passk)
    s = sub.add_parser("hack", help="stage hack: GRPO on a hackable substring verifier, every seed")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(fn=_hack)
    s = sub.add_parser("worked", help="stage worked: every closed-form chapter number, with figures")
    s.set_defaults(fn=_worked)
    s = sub.add_parser("report", help="stage report: claims vs measured values -> reports/report.md/.html")
    s.set_defaults(fn=_report)
    s = sub.add_parser("provenance", help="which stage, params, inputs and MLflow runs produced PATH")
    s.add_argument("path", help="a figure, metrics file or other output recorded in dvc.lock")
    s.add_argument("--no-status", action="store_true", help="skip the `dvc status` staleness check")
    s.set_defaults(fn=_provenance)
    s = sub.add_parser("diff", help="two GRPO variants side by side (final metrics, pass@k, paired test)")
    s.add_argument("a")
    s.add_argument("b")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.set_defaults(fn=_diff)
    s = sub.add_parser("bench", help="speed/memory benchmarks -> reports/benchmarks.json")
    s.add_argument("--out", default="reports/benchmarks.json")
    s.add_argument("--only", nargs="*", default=None, help="names of benchmarks to run (default: all)")
    s.set_defaults(fn=_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from rlvr.provenance import ProvenanceError
    from rlvr.tracking import TrackingError

    try:
        result = args.fn(args)
    except (ConfigError, TrackingError, ProvenanceError, FileNotFoundError) as exc:
        print(f"rlvr: error: {exc}", file=sys.stderr)
        return 2
    print(result if isinstance(result, Text) else json.dumps(result, indent=2, sort_keys=True, default=str))
    return 0
