"""The same chains on two machines: one stage's per-chain values as two commits hold them (each the
results one CPU made from the same code, params and seeds), paired by chain, as a table and a figure.

    python experiments/machines.py 352228b cd9dc33 hack \
        digits_per_response_end-digits_per_response_start reward_minus_accuracy_end

A metric is a key of the stage's per-chain values (`per_seed` in reports/metrics/<stage>.json), or
`x-y`, the per-chain difference of two (a rise from start to end). Every difference is B - A. On
one machine a chain is bit-for-bit repeatable; between machines the floats differ and a chain
amplifies that, so this shows how far one chain moves with the CPU, beside the spread of chains.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import numpy as np

from rlvr.io.gitinfo import committed_bytes
from rlvr.io.system import cpu_model
from rlvr.report.compare import delta


def committed_json(rev: str, path: str) -> dict:
    """A JSON file as commit `rev` holds it (path relative to this folder)."""
    data = committed_bytes(Path.cwd(), rev, f"./{path}")
    if data is None:
        raise SystemExit(f"machines: {rev}:{path}: not in that commit")
    return json.loads(data)


def per_chain(metrics: dict, metric: str) -> dict[int, float]:
    """{chain: value} of `metric` (a key, or `x-y`: x minus y per chain)."""
    keys = metric.split("-")
    missing = [k for k in keys if k not in metrics["per_seed"]]
    if missing:
        raise SystemExit(
            f"machines: {missing[0]}: no such per-chain value; known: {', '.join(metrics['per_seed'])}"
        )
    values = [np.asarray(metrics["per_seed"][k], dtype=float) for k in keys]
    column = values[0] - values[1] if len(values) == 2 else values[0]  # (S,)
    return dict(zip(metrics["seeds"], column.tolist(), strict=True))


def compare(a: dict[int, float], b: dict[int, float]) -> dict:
    """B - A over the chains both ran: mean with its paired 95% interval, SD, how many moved down."""
    chains = sorted(set(a) & set(b))
    xa, xb = np.array([a[c] for c in chains]), np.array([b[c] for c in chains])  # (S,), (S,)
    d = xb - xa
    out = delta(xa.tolist(), xb.tolist(), paired=True, bounds=(-np.inf, np.inf))
    return {
        "chains": chains,
        "a": xa.tolist(),
        "b": xb.tolist(),
        "mean": out["mean"],
        "ci95": out["ci95"],
        "sd": float(d.std(ddof=1)),
        "lower_on_b": int((d < 0).sum()),
        "chain_sd_a": float(xa.std(ddof=1)),
    }


def draw(results: dict[str, dict], names: tuple[str, str], out: Path, footer: str) -> None:
    """One panel per metric: each chain's value on machine A (x) against machine B (y), the line
    where they would be equal, and B - A in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.2 * len(results), 5.0), squeeze=False)
    for ax, (metric, r) in zip(axes[0], results.items(), strict=True):
        ax.scatter(r["a"], r["b"], s=22, color="C0", zorder=3, label="one chain")
        lo, hi = min(r["a"] + r["b"]), max(r["a"] + r["b"])
        pad = 0.05 * (hi - lo or 1)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.5", lw=1, ls="--", label="same on both")
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_aspect("equal")
        ax.set_xlabel(f"{names[0]}")
        ax.set_ylabel(f"{names[1]}")
        ci = r["ci95"] or [float("nan"), float("nan")]
        ax.set_title(
            f"{metric}\nB - A {r['mean']:+.3g} [{ci[0]:+.3g}, {ci[1]:+.3g}], "
            f"lower on B in {r['lower_on_b']} of {len(r['chains'])}\n"
            f"(chains' own SD on A: {r['chain_sd_a']:.3g})",
            fontsize=9,
        )
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle("The same chains, code, params and seeds on two CPUs (A: x axis, B: y axis)", fontsize=11)
    fig.text(0.5, 0.01, footer, ha="center", fontsize=7, color="0.35")
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("a", help="commit holding machine A's results")
    p.add_argument("b", help="commit holding machine B's results (differences are B - A)")
    p.add_argument("stage", help="the stage whose metrics file to pair (reports/metrics/<stage>.json)")
    p.add_argument("metrics", nargs="+", help="per-chain keys, or x-y for a per-chain difference")
    p.add_argument("--out", default=None, help="figure path (default: docs/figures/<stage>-machines.png)")
    args = p.parse_args(argv)
    path = f"reports/metrics/{args.stage}.json"
    ma, mb = committed_json(args.a, path), committed_json(args.b, path)
    runs = f"reports/runs/{args.stage}.json"
    names = tuple(
        f"{rev[:7]}: {committed_json(rev, runs).get('made', {}).get('cpu', 'CPU not recorded')}"
        for rev in (args.a, args.b)
    )
    results = {m: compare(per_chain(ma, m), per_chain(mb, m)) for m in args.metrics}
    for m, r in results.items():
        ci = r["ci95"] or [None, None]
        moved = f"lower on B in {r['lower_on_b']} of {len(r['chains'])}"
        print(f"{m}: B - A {r['mean']:+.4g} [{ci[0]:+.4g}, {ci[1]:+.4g}] (SD {r['sd']:.3g}), {moved}")
    out = Path(args.out or f"docs/figures/{args.stage}-machines.png")
    command = "python experiments/machines.py " + " ".join([args.a, args.b, args.stage, *args.metrics])
    footer = f"{command} · drawn on {cpu_model()}, {datetime.date.today().isoformat()}"
    draw(results, names, out, footer)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
