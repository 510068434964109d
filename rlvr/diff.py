"""`rlvr diff A B`: two GRPO variants side by side, from their metrics files and pass@k counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvr.config import ConfigError

DIFF_KEYS = ("eval_acc_start", "eval_acc_final", "eval_acc_gain", "reward_final", "kl_k3_nats_max",
             "kl_exact_nats_final", "entropy_nats_start", "entropy_nats_final", "clip_frac_max",
             "frac_reward_zero_std_mean", "frac_tokens_with_grad_mean", "samples_generated_total",
             "response_len_final", "step_seconds_median")


def diff_variants(metrics_dir: Path, counts_path: Path, a: str, b: str) -> dict:
    """Final metrics (mean, 95% CI over seeds) of two variants, their deltas, pass@k at 1/8/64 and a
    paired Wilcoxon test on the held-out problems (per-problem pass@1, seeds pooled)."""
    import numpy as np

    from rlvr.passk import pass_at_k, paired_test

    def load(v: str) -> dict:
        path = metrics_dir / f"grpo-{v}.json"
        if not path.is_file():
            known = sorted(p.stem.removeprefix("grpo-") for p in metrics_dir.glob("grpo-*.json"))
            raise ConfigError(f"variant {v!r}: no {path}; variants with results: {', '.join(known) or 'none'}")
        return json.loads(path.read_text())

    ma, mb = load(a), load(b)
    rows = []
    for k in DIFF_KEYS:
        if k in ma and k in mb:
            rows.append({"metric": k, a: ma[k], f"{a}_ci95": ma["ci95"].get(k), b: mb[k], f"{b}_ci95": mb["ci95"].get(k),
                         "delta": mb[k] - ma[k]})
    out: dict[str, Any] = {"a": a, "b": b, "task_a": ma["task"], "task_b": mb["task"], "metrics": rows}
    if counts_path.is_file():
        data = json.loads(counts_path.read_text())
        n, counts = data["n"], data["counts"]
        pooled = {}
        for v, m in ((a, ma), (b, mb)):
            seeds = [counts.get(f"{v}/seed{s}") for s in m["seeds"]]
            if all(c is not None for c in seeds):
                pooled[v] = np.sum(seeds, axis=0)  # (P,) correct out of n * seeds
        if len(pooled) == 2:
            N = n * len(ma["seeds"])
            out["passk"] = {v: {f"pass_at_{k}": float(np.mean([pass_at_k(np.array(counts[f'{v}/seed{s}']), n, k).mean()
                                                               for s in m["seeds"]]))
                                for k in (1, 8, n)} for v, m in ((a, ma), (b, mb))}
            out["paired_test_pass_at_1"] = paired_test(pooled[b], pooled[a], N, 1)
    return out


def format_diff(d: dict) -> str:
    a, b = d["a"], d["b"]
    ci = lambda c: "" if not c or c[0] is None else f" [{c[0]:.3g}, {c[1]:.3g}]"  # noqa: E731
    lines = [f"{'metric':28} {a:>26} {b:>26} {'delta (b-a)':>12}"]
    for r in d["metrics"]:
        lines.append(f"{r['metric']:28} {r[a]:>10.4g}{ci(r[a + '_ci95']):>16} {r[b]:>10.4g}{ci(r[b + '_ci95']):>16} "
                     f"{r['delta']:>+12.4g}")
    if "passk" in d:
        for k in d["passk"][a]:
            va, vb = d["passk"][a][k], d["passk"][b][k]
            lines.append(f"{k:28} {va:>26.4g} {vb:>26.4g} {vb - va:>+12.4g}")
        t = d["paired_test_pass_at_1"]
        lines.append(f"paired Wilcoxon on per-problem pass@1 (seeds pooled): p = {t['pvalue']:.3g}, "
                     f"mean diff (b-a) = {t['mean_diff_a_minus_b']:+.4g}")
    return "\n".join(lines)
