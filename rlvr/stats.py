"""Statistics over seeds: the mean of a metric and its Student-t interval, one function each.

Every stage that trains several seeds summarises them here, so "mean" and "95% interval" are
computed one way everywhere (metrics files, the report, `rlvr diff`).
"""

from __future__ import annotations

import math
import statistics
import warnings


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
    """Mean and Student-t confidence interval over seeds (None with fewer than two seeds, and NaN
    with no interval where a seed has no value: a run whose controlled end never came has no steps
    to it, and the mean of the others would not be the mean over seeds)."""
    if any(v != v for v in values):
        return math.nan, None, None
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


# A metric's range, read from the words of its name: fractions of problems, samples, tokens or steps
# lie in [0, 1]; KL, entropy, cross-entropy, sizes, counts and times are >= 0.
_UNIT_WORDS = {"acc", "accuracy", "frac", "reward", "pass", "reached", "val"}
_NONNEG_WORDS = {"kl", "nats", "entropy", "loss", "len", "seconds", "second", "samples", "steps", "digits"}
_NONNEG_WORDS |= {"solved", "tokens"}
_DIFFERENCE_WORDS = {"gain", "minus"}  # a difference of two rates: [-1, 1]


def metric_bounds(key: str) -> tuple[float, float]:
    """The range a metric's values can take, read from the words of its name (`eval_acc_final`:
    [0, 1]; `eval_acc_gain`, `reward_minus_accuracy_end`: differences of rates, [-1, 1];
    `kl_k3_nats_max`: [0, inf)); a metric of unknown words is unbounded."""
    words = set(key.split("_"))
    if words & _DIFFERENCE_WORDS and words & _UNIT_WORDS:
        return -1.0, 1.0
    if words & _UNIT_WORDS:
        return 0.0, 1.0
    if words & _NONNEG_WORDS:
        return 0.0, math.inf
    return -math.inf, math.inf


def clip(lo: float | None, hi: float | None, bounds: tuple[float, float]) -> list[float | None]:
    """An interval cut to `bounds`, the values its metric can take ([None, None] stays: no interval).
    The true mean lies within them, so the cut never drops it and leaves coverage as it was; it
    only removes impossible values (an accuracy above 1, a negative KL)."""
    if lo is None or hi is None:
        return [lo, hi]
    return [max(lo, bounds[0]), min(hi, bounds[1])]


def seed_metrics(per_seed: dict[int, dict]) -> dict:
    """The metrics-file layout of a multi-seed stage: each metric's mean at the top level, then
    `ci95` {metric: [lo, hi]} (cut to the metric's range, `metric_bounds`) and `per_seed`
    {metric: [values]}."""
    summary = summarise_seeds(per_seed)
    return {
        **{k: v["mean"] for k, v in summary.items()},
        "ci95": {k: clip(v["ci95_lo"], v["ci95_hi"], metric_bounds(k)) for k, v in summary.items()},
        "per_seed": {k: v["per_seed"] for k, v in summary.items()},
    }


def variance_components(per_rep: list[list[float]], eval_sd: float | None = None) -> dict[str, float]:
    """Where the spread of a chained metric lives, each as the SD it gives one chain's value.

    per_rep: for each chain (one SFT start), the values of its GRPO seeds (one or more); a chain's
    value is their mean. eval_sd: the SD of one evaluation of a fixed model (its sampling noise).
    - evaluation: `eval_sd` over the chain's R seeds, eval_sd / sqrt(R);
    - grpo: the pooled SD between GRPO seeds of one start, less the evaluation's share, over sqrt(R)
      (only where some chain has two or more seeds);
    - starts: what the spread of the chain values leaves after those two (0 where it is all theirs).
    """
    chains = [[float(v) for v in reps] for reps in per_rep]
    R = min(len(reps) for reps in chains)
    out: dict[str, float] = {}
    within = 0.0
    if R >= 2:
        pooled = statistics.fmean([statistics.variance(reps) for reps in chains])  # one seed's variance
        grpo_var = max(0.0, pooled - (eval_sd or 0.0) ** 2)
        out["grpo"] = (grpo_var / R) ** 0.5
        within = pooled / R
    if eval_sd is not None:
        out["evaluation"] = eval_sd / R**0.5
        if R < 2:
            within = eval_sd**2 / R
    if len(chains) >= 2:
        between = statistics.variance([statistics.fmean(reps) for reps in chains])
        out["starts"] = max(0.0, between - within) ** 0.5
    return out


def share_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a share: k runs of n that did something. Beta
    quantiles (`scipy.special.betaincinv`, what `scipy.stats.binomtest(...).proportion_ci` computes)."""
    from scipy.special import betaincinv

    tail = (1 - level) / 2
    lo = 0.0 if k == 0 else float(betaincinv(k, n - k + 1, tail))
    hi = 1.0 if k == n else float(betaincinv(k + 1, n - k, 1 - tail))
    return lo, hi


def survival(steps: list[float], reached: list[bool], level: float = 0.95) -> dict:
    """Steps to an event (a controlled end) over runs, some censored (the step cap came first: the
    run's `steps` is where it stopped, and all we know is that its event lies beyond): the
    Kaplan-Meier estimate of the share of runs still short of the event after each step, with its
    pointwise `level` band (log-log; `scipy.stats.ecdf` on `CensoredData`), and the median steps with
    its interval, read off the curve and its band (Brookmeyer-Crowley). A median or bound that the
    curve never reaches (more than half the runs censored) is None: "not reached"."""
    import numpy as np
    from scipy.stats import CensoredData, ecdf

    if len(steps) != len(reached) or not steps:
        raise ValueError(f"survival: {len(steps)} step counts for {len(reached)} runs")
    done = [float(t) for t, r in zip(steps, reached) if r]
    capped = [float(t) for t, r in zip(steps, reached) if not r]
    sf = ecdf(CensoredData(uncensored=np.asarray(done), right=np.asarray(capped))).sf
    with warnings.catch_warnings():  # the log-log band is undefined where the curve is 0 or 1
        warnings.simplefilter("ignore", RuntimeWarning)
        band = sf.confidence_interval(level, method="log-log")
    at, still = sf.quantiles.tolist(), sf.probabilities.tolist()
    # where the band is undefined (the curve at 0), it is the curve itself
    lo = [p if math.isnan(b) else b for p, b in zip(still, band.low.probabilities.tolist())]
    hi = [p if math.isnan(b) else b for p, b in zip(still, band.high.probabilities.tolist())]

    def first_below_half(curve: list[float]) -> float | None:
        return next((t for t, p in zip(at, curve) if p <= 0.5), None)

    return {
        "steps": at,
        "still_short": still,  # share of runs not yet at the event after each step of `steps`
        "band": [lo, hi],
        "median": first_below_half(still),
        "median_ci": [first_below_half(lo), first_below_half(hi)],
        "level": level,
        "runs": len(steps),
        "censored": sorted(capped),
    }


def step_cap(steps: list[float], miss: float, multiple: int = 100) -> int:
    """A step cap that one more run misses with probability `miss`: the upper one-sided 1 - `miss`
    prediction bound for one run's steps to its end, from calibration runs that all reached it
    (steps to a target are positive and right-skewed: on the log scale, mean + t(n-1) s
    sqrt(1 + 1/n)), rounded up to a `multiple` of steps."""
    if len(steps) < 2 or any(t <= 0 for t in steps):
        raise ValueError(f"step_cap: needs two or more positive step counts, got {steps}")
    logs = [math.log(t) for t in steps]
    n, mean, sd = len(logs), statistics.fmean(logs), statistics.stdev(logs)
    bound = math.exp(mean + t_quantile(n - 1, 1 - miss) * sd * math.sqrt(1 + 1 / n))
    return multiple * math.ceil(bound / multiple - 1e-9)  # exp(log(x)) may land a hair above x


def bca_interval(
    values: list[float], seed: int = 0, resamples: int = 9999, level: float = 0.95
) -> tuple[float, float]:
    """The BCa bootstrap interval (95% unless `level` says) of the mean of `values` (resampling
    them), by `scipy.stats.bootstrap`: the declared check on a skewed metric's t-interval."""
    import numpy as np
    from scipy.stats import bootstrap

    res = bootstrap(
        (np.asarray(values, dtype=float),),
        np.mean,
        n_resamples=resamples,
        method="BCa",
        confidence_level=level,
        random_state=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def one_run_interval(
    chains: list[float], reps: list[list[float]] | None = None, eval_sd: float = 0.0, level: float = 0.95
) -> tuple[float, float]:
    """The `level` prediction interval for one run like the book's (one start, one GRPO seed), from
    chains whose value is the mean of their nested runs `reps`: mean ± t(n-1) sqrt(s_run² + s²/n),
    where s² is the spread of the chain values and one run's variance s_run² adds back the part of
    the within-chain spread that averaging R runs removed, s² + w² (1 - 1/R), and `eval_sd`², the
    evaluation noise of the book's own (sampled) measure where ours is exact or larger."""
    n = len(chains)
    mean, s2 = statistics.fmean(chains), statistics.variance(chains)
    R = min((len(r) for r in reps), default=1) if reps else 1
    within = statistics.fmean([statistics.variance(r) for r in reps]) if reps and R >= 2 else 0.0
    run2 = s2 + within * (1 - 1 / R) + eval_sd**2
    half = t_quantile(n - 1, 0.5 + level / 2) * math.sqrt(run2 + s2 / n)
    return mean - half, mean + half
