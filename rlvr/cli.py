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
    s = sub.add_parser("bench", help="speed/memory benchmarks -> reports/benchmarks.json")
    s.add_argument("--out", default="reports/benchmarks.json")
    s.add_argument("--only", nargs="*", default=None, help="names of benchmarks to run (default: all)")
    s.set_defaults(fn=_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from rlvr.tracking import TrackingError

    try:
        result = args.fn(args)
    except (ConfigError, TrackingError, FileNotFoundError) as exc:
        print(f"rlvr: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, sort_keys=True, default=str))
    return 0
