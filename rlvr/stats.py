"""Statistics over seeds: the mean of a metric and its Student-t interval, one function each.

Every stage that trains several seeds summarises them here, so "mean" and "95% interval" are
computed one way everywhere (metrics files, the report, `rlvr diff`).
"""

from __future__ import annotations

import statistics


def t_quantile(df: float, q: float = 0.975) -> float:
    """The Student-t quantile: `scipy.stats.t.ppf(q, df)`, bit for bit (it is this special function),
    without importing scipy.stats (about 0.7 s a process, every stage that summarises seeds)."""
    from scipy.special import stdtrit

    return float(stdtrit(df, q))


def t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p-value of a t statistic: `2 * scipy.stats.t.sf(|t|, df)`, bit for bit."""
    from scipy.special import stdtr

    return float(2 * stdtr(df, -abs(t)))


def mean_ci(values: list[float], level: float = 0.95) -> tuple[float, float | None, float | None]:
    """Mean and Student-t confidence interval over seeds (None with fewer than two seeds)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None, None
    half = t_quantile(len(values) - 1, 0.5 + level / 2) * statistics.stdev(values) / len(values) ** 0.5
    return mean, mean - half, mean + half


def summarise_seeds(per_seed: dict[int, dict]) -> dict:
    """{seed: {metric: value}} -> {metric: {"mean", "ci95_lo", "ci95_hi", "per_seed": [...]}}, over the
    metrics every seed has, seeds in ascending order."""
    keys = sorted(set.intersection(*(set(f) for f in per_seed.values())))
    out = {}
    for k in keys:
        vals = [per_seed[s][k] for s in sorted(per_seed)]
        mean, lo, hi = mean_ci(vals)
        out[k] = {"mean": mean, "ci95_lo": lo, "ci95_hi": hi, "per_seed": vals}
    return out


def seed_metrics(per_seed: dict[int, dict]) -> dict:
    """The metrics-file layout of a multi-seed stage: each metric's mean at the top level, then
    `ci95` {metric: [lo, hi]} and `per_seed` {metric: [values]}."""
    summary = summarise_seeds(per_seed)
    return {
        **{k: v["mean"] for k, v in summary.items()},
        "ci95": {k: [v["ci95_lo"], v["ci95_hi"]] for k, v in summary.items()},
        "per_seed": {k: v["per_seed"] for k, v in summary.items()},
    }
