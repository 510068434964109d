"""pass@k: does RL solve new problems, or the same problems more reliably?

pass@1 is accuracy; pass@k at large k is coverage (can the model solve the problem at all, given
many tries?). RL with verifiable rewards usually raises the first, while the second can stall or
fall as the policy's entropy collapses (chapter B, "the pass@k debate"). This module turns
per-problem correct counts into the numbers that settle it for one pair of models: pass@k curves with
bootstrap bands, the k at which the base model catches up, the problems only one model solves, and
a paired test on the same problems (`rlvr.passk_summary` combines them over chains). Pure
numpy/scipy, vectorised over problems.

Each per-model function takes `c`, an int array (P,) of correct samples out of `n` drawn per problem.

Where this departs from the textbook 1 - C(n-c, k) / C(n, k) (Chen et al., 2021):
1. The binomial ratio is evaluated as the product prod_{i=n-c+1}^{n} (1 - k/i), never as two
   binomials: those leave float range from n = 1030 (C(1030, 515) > 1.8e308), the product never does.
2. c = 0 gives exactly 0.0 and n - c < k exactly 1.0 (every k-subset holds a correct sample), not
   whatever rounding leaves: these are the cases that decide "never solved" and "always solved".
3. Curves, bands and crossings weigh every problem equally (the chapter's "averaged over problems").
"""

from __future__ import annotations

import numpy as np


def _check_n(n: int) -> int:
    if int(n) != n or n < 1:
        raise ValueError(f"n = {n} samples per problem must be an integer >= 1")
    return int(n)


def _check_counts(c, n: int) -> np.ndarray:
    """Correct counts as an int array (P,), each in [0, n]; a one-line ValueError otherwise."""
    n, c = _check_n(n), np.asarray(c)
    if c.ndim != 1:
        raise ValueError(f"c must be a 1-D array of correct counts per problem, got shape {c.shape}")
    fractional = np.mod(c, 1) != 0  # (P,)
    if fractional.any():
        raise ValueError(f"c = {c[fractional][0]} is not a whole number of correct samples")
    bad = (c < 0) | (c > n)  # (P,)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"c = {c[i]} (problem {i}) must satisfy 0 <= c <= n = {n}")
    return c.astype(np.int64)


def _check_k(k: int, n: int) -> int:
    if int(k) != k or not 1 <= k <= n:
        raise ValueError(f"k = {k} must be an integer with 1 <= k <= n = {n}")
    return int(k)


def _ks_or_all(ks, n: int) -> np.ndarray:
    """The k grid (K,): the given ks, each checked, or every k in 1..n."""
    ks = np.arange(1, _check_n(n) + 1) if ks is None else np.atleast_1d(np.asarray(ks))
    return np.array([_check_k(k, n) for k in ks], dtype=np.int64)  # (K,)


def _same_problems(c_a, c_b) -> tuple[np.ndarray, np.ndarray]:
    c_a, c_b = np.asarray(c_a), np.asarray(c_b)
    if c_a.shape != c_b.shape or c_a.size == 0:
        raise ValueError(
            f"both models need counts on the same non-empty problem set, "
            f"got shapes {c_a.shape} and {c_b.shape}"
        )
    return c_a, c_b


def pass_at_k(c, n: int, k: int) -> np.ndarray:
    """Unbiased pass@k per problem: c (P,) correct out of n samples -> (P,) floats in [0, 1].

    C(n-c, k)/C(n, k), the chance that k samples drawn without replacement are all wrong, equals
    prod_{i=n-c+1}^{n} (1 - k/i): a suffix product of one (n,) array, shared by all problems.
    """
    c, k = _check_counts(c, n), _check_k(k, n)
    factors = 1.0 - k / np.arange(1, n + 1)  # (n,) the factor for i = 1..n
    suffix = np.append(np.cumprod(factors[::-1])[::-1], 1.0)  # (n+1,) suffix[j] = prod_{i>j}
    out = 1.0 - suffix[n - c]  # (P,)
    out[c == 0] = 0.0
    out[n - c < k] = 1.0  # the product then holds the factor i = k, which is 0: make it exact
    return out


def exact_pass_at_k(p, k: int) -> float:
    """Mean pass@k over problems from each problem's exact solve probability p (P,): the mean of
    1 - (1 - p)^k, what the unbiased estimator from counts estimates, with no sampling noise."""
    p = np.asarray(p, dtype=np.float64)
    if p.size == 0 or np.any((p < 0) | (p > 1)) or k < 1:
        raise ValueError(f"need solve probabilities in [0, 1] and k >= 1 (got {p.size} problems, k = {k})")
    return float(np.mean(1.0 - (1.0 - p) ** k))


def _table(c, n: int, ks) -> np.ndarray:
    """pass@k of every problem at every k: (P,) -> (P, K)."""
    c = _check_counts(c, n)
    if c.size == 0:
        raise ValueError("c is empty: pass@k averages need at least one problem")
    return np.stack([pass_at_k(c, n, k) for k in _ks_or_all(ks, n)], axis=1)  # (P, K)


def pass_at_k_curve(c, n: int, ks=None) -> tuple[np.ndarray, np.ndarray]:
    """Mean pass@k over problems at each k in ks (default 1..n): returns ks (K,), means (K,)."""
    ks = _ks_or_all(ks, n)
    return ks, _table(c, n, ks).mean(axis=0)


def bootstrap_band(
    c, n: int, ks=None, resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile-bootstrap band of mean pass@k, resampling problems: returns lo (K,), hi (K,).

    Problems, not samples, are resampled: the question is how the mean would move on another draw
    of P problems from the same task. A resample is a row of per-problem draw counts, so its mean is
    one matrix product and the (R, P, K) tensor of resampled values is never built.

    Why not `scipy.stats.bootstrap(method="percentile")`: it gives the same band (it draws the same
    indices from a generator of the same seed: 1e-15 apart, tests/maths/test_passk.py), but builds
    that tensor. At the stage's sizes (300 problems, k = 1..64, 1000 resamples) it peaks at 149 MiB
    against 9.8 MiB here and takes 45 ms against 13 ms (`rlvr bench --only bootstrap`, a 2-core AMD
    EPYC family 25, 2026-12-04), and the stage bands every model's curve. BCa, where a claim
    declares it, is scipy's (`rlvr.stats.bca_interval`).
    """
    if not 0 < level < 1:
        raise ValueError(f"level = {level} must lie strictly between 0 and 1 (e.g. 0.95)")
    if int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples = {resamples} must be an integer >= 1")
    table = _table(c, n, ks)  # (P, K)
    P, R = table.shape[0], int(resamples)
    draws = np.random.default_rng(seed).integers(0, P, size=(R, P))  # (R, P) problem indices
    flat = (draws + P * np.arange(R)[:, None]).ravel()  # (R*P,) offset so rows do not collide
    weights = np.bincount(flat, minlength=R * P).reshape(R, P)  # (R, P) times each problem drawn
    means = weights @ table / P  # (R, K)
    tail = (1.0 - level) / 2
    lo, hi = np.quantile(means, [tail, 1.0 - tail], axis=0)  # (K,) each
    return lo, hi


def never_solved(c) -> int:
    """Number of problems with no correct sample (c == 0): pass@k is 0 there for every k."""
    return int(np.count_nonzero(np.asarray(c) == 0))


def never_solved_in(c, n: int, k: int) -> float:
    """The expected number of problems that k samples never solve, sum_i C(n - c_i, k) / C(n, k),
    from n >= k samples: the chapter's "never solved in 64" without the luck of one 64-sample draw.
    It is P (1 - mean pass@k): the same statistic as pass@k, in problems."""
    return float(np.sum(1.0 - pass_at_k(c, n, k)))


def one_run_sd(c, n: int, k: int, m: int, resamples: int = 200, seed: int = 0) -> float:
    """The SD of mean pass@k over problems as one run with m samples per problem would measure it,
    for a model whose per-problem solve rates are c / n: its evaluation noise, by resampling the
    samples (each problem's count redrawn as Binomial(m, c_i / n), `resamples` times). m = n: the
    noise of our own estimate; m = 64: one run at the chapter's sample size."""
    c = _check_counts(c, n)
    draws = np.random.default_rng(seed).binomial(m, c / n, size=(resamples, c.size))  # (R, P)
    return float(np.std([pass_at_k(row, m, k).mean() for row in draws]))


def thin(c, n: int, m: int, seed: int = 0) -> np.ndarray:
    """The correct counts among m of each problem's n samples, drawn at random (hypergeometric):
    what an m-sample run would have counted, so that "solved" means the same for both models of a
    comparison whatever each was scored with."""
    c = _check_counts(c, n)
    if m == n:
        return c
    return np.random.default_rng(seed).hypergeometric(c, n - c, m)  # (P,)


def solved_by_one_only(c_a, c_b) -> tuple[int, int]:
    """(solved by a and never by b, solved by b and never by a); solved means c > 0."""
    c_a, c_b = _same_problems(c_a, c_b)
    solved_a, solved_b = c_a > 0, c_b > 0  # (P,) each
    return int(np.count_nonzero(solved_a & ~solved_b)), int(np.count_nonzero(solved_b & ~solved_a))


def first_crossing(ks, base, rl) -> int | None:
    """The crossover: the first k in ks at which RL's pass@k falls strictly below the base model's.

    The one definition every table and figure uses. RL must be strictly ahead at ks[0], else there
    is nothing to cross (None, as when RL never falls below). A tie is no crossing: two models that
    both reach 1.0 at k = 64 have not crossed. ks, base, rl: (K,) each, ks ascending.
    """
    ks, base, rl = np.asarray(ks), np.asarray(base), np.asarray(rl)
    if not rl[0] > base[0]:
        return None
    below = np.flatnonzero(rl < base)
    return int(ks[below[0]]) if below.size else None


NO_CROSSING = {"tie": "tie", "ahead": "RL ahead to k = {k}", "behind": "RL not ahead at k = 1"}


def crossing_label(ks, base, rl) -> str:
    """Why two curves do not cross (`first_crossing` is None): "tie" (never apart: both at 1.0, say),
    "RL ahead to k = 64" (ahead or level at every k, ahead somewhere) or "RL not ahead at k = 1"."""
    ks, base, rl = np.asarray(ks), np.asarray(base), np.asarray(rl)
    if not rl[0] > base[0]:
        return NO_CROSSING["tie" if np.array_equal(rl, base) else "behind"]
    return NO_CROSSING["ahead"].format(k=int(ks[-1]))


def crossings_text(per_chain: list) -> str:
    """Per-chain crossovers as a reader sees them everywhere: "16, tie, RL ahead to k = 64, 62" (a
    k, or why the chain has none; a bare None reads "none")."""
    return ", ".join("none" if k is None else str(k) for k in per_chain)


def grid_crossing(ks, diff) -> int | None:
    """A run's first crossing on a grid of k (the chapter's 1, 2, 4, ..., 64): the first k where RL's
    pass@k falls strictly below SFT's, given RL strictly ahead at the grid's first k. diff: RL - SFT
    at k = 1, 2, ... (index k - 1). None where RL is not ahead at the first k or never falls below."""
    ks = sorted(ks)
    if not diff[ks[0] - 1] > 0:
        return None
    return next((k for k in ks if diff[k - 1] < 0), None)


def crossover_k(c_base, c_rl, n: int, n_rl: int | None = None, k_max: int | None = None) -> int | None:
    """Smallest k in 1..k_max (default n) at which RL's mean pass@k falls strictly below the base
    model's (`first_crossing` on the two curves): None when RL is not ahead at k = 1, or stays ahead
    or level up to k_max; `crossing_label` says which. n_rl: RL's samples per problem (default n)."""
    n_rl = n if n_rl is None else n_rl
    grid = np.arange(1, (k_max or min(n, n_rl)) + 1)
    _, base = pass_at_k_curve(c_base, n, grid)
    _, rl = pass_at_k_curve(c_rl, n_rl, grid)
    return first_crossing(grid, base, rl)


def paired_test(c_a, c_b, n: int, k: int, n_b: int | None = None) -> dict:
    """Wilcoxon signed-rank test of per-problem pass@k, a (n samples) versus b (n_b, default n), on
    the same problems.

    Returns statistic, pvalue (two-sided) and mean_diff_a_minus_b (mean pass@k of a minus b's).
    """
    c_a, c_b = _same_problems(c_a, c_b)
    diff = pass_at_k(c_a, n, k) - pass_at_k(c_b, n if n_b is None else n_b, k)  # (P,)
    P = diff.size
    if not diff.any():  # scipy may refuse all-zero differences; zsplit's answer is known anyway
        return {"statistic": P * (P + 1) / 4, "pvalue": 1.0, "mean_diff_a_minus_b": 0.0}
    # zsplit keeps problems where both models score the same (most of them at k = n, where both
    # solve nearly everything) and splits their ranks evenly between the signs. "wilcox" would drop
    # them and test only the problems that differ, overstating a gap confined to a handful of
    # problems when reported as a benchmark-level result; zsplit is the conservative choice.
    from scipy.stats import wilcoxon  # ~0.7 s to import: only the paired test needs it

    res = wilcoxon(diff, zero_method="zsplit")
    return {
        "statistic": float(res.statistic),
        "pvalue": float(res.pvalue),
        "mean_diff_a_minus_b": float(diff.mean()),
    }


def _model_summary(c, n: int, grid: np.ndarray, resamples: int, seed: int, name: str) -> dict:
    """pass@k means and 95% bands on the grid (ending at k_max), pass@1 / pass@k_max picked out, the
    expected never-solved count in k_max samples, and one run's evaluation noise at n = k."""
    _, mean = pass_at_k_curve(c, n, grid)  # (K,)
    lo, hi = bootstrap_band(c, n, grid, resamples, seed, level=0.95)  # (K,) each
    k_max = int(grid[-1])
    return {
        f"pass_at_k_{name}": mean.tolist(),
        f"pass_at_k_{name}_ci": np.stack([lo, hi], axis=1).tolist(),  # (K, 2)
        f"pass_at_1_{name}": float(mean[0]),
        f"pass_at_1_{name}_ci": [float(lo[0]), float(hi[0])],
        f"pass_at_n_{name}": float(mean[-1]),
        f"pass_at_n_{name}_ci": [float(lo[-1]), float(hi[-1])],
        f"never_solved_{name}": never_solved_in(c, n, k_max),
        f"eval_sd_pass_at_1_{name}": one_run_sd(c, n, 1, n),
        f"eval_sd_pass_at_n_{name}": one_run_sd(c, n, k_max, n),
        f"chapter_sd_pass_at_1_{name}": one_run_sd(c, n, 1, k_max),
        f"chapter_sd_pass_at_n_{name}": one_run_sd(c, n, k_max, k_max),
    }


def compare(
    c_base,
    c_rl,
    n: int,
    ks=None,
    resamples: int = 1000,
    seed: int = 0,
    n_rl: int | None = None,
    k_max: int | None = None,
) -> dict:
    """Everything the pass@k question needs for a base model (n samples a problem) and its
    RL-trained version (n_rl, default n).

    ks (default 1..k_max) is the grid of the reported curves, k_max (default the smaller n) its end;
    1 and k_max are always added. Both models are bootstrapped with the same seed, hence over the
    same resampled problem sets. Paired tests are (rl, base), so their mean differences read rl
    minus base. `eval_sd_*`: the SD of our estimate from resampling a fixed model's samples;
    `chapter_sd_*`: one run's at the chapter's n = k_max (what a tolerance may not undercut).
    """
    c_base, c_rl = _same_problems(c_base, c_rl)
    n_rl = n if n_rl is None else n_rl
    k_max = min(n, n_rl) if k_max is None else k_max
    grid = np.union1d(_ks_or_all(ks, k_max), [1, k_max])  # (K,) sorted, starts at 1, ends at k_max
    out = {
        "n_problems": int(c_base.size),
        "samples_per_problem": int(n_rl),
        "ci_level": 0.95,
        "ks": grid.tolist(),
    }
    out.update(_model_summary(c_base, n, grid, resamples, seed, "base"))
    out.update(_model_summary(c_rl, n_rl, grid, resamples, seed, "rl"))
    out["crossover_k"] = crossover_k(c_base, c_rl, n, n_rl, k_max)
    out["solved_by_base_only"], out["solved_by_rl_only"] = solved_by_one_only(
        thin(c_base, n, k_max, seed), thin(c_rl, n_rl, k_max, seed)
    )
    for label, k in (("1", 1), ("n", k_max)):
        test = paired_test(c_rl, c_base, n_rl, k, n)
        out[f"wilcoxon_statistic_at_{label}"] = test["statistic"]
        out[f"wilcoxon_pvalue_at_{label}"] = test["pvalue"]
        out[f"pass_at_{label}_diff_rl_minus_base"] = test["mean_diff_a_minus_b"]
    return out


def two_problem_toy(
    p_a_base: float = 0.6, p_b_base: float = 0.05, p_a_rl: float = 0.98, p_b_rl: float = 0.01, ks=None
) -> dict:
    """Chapter B's two-problem toy in closed form (true pass@k, no sampling).

    A model that solves problem A with probability p_a and B with p_b per sample has pass@k equal to
    the mean over the two problems of 1 - (1 - p)^k. ks defaults to 1..64. Returns ks (K,),
    pass_at_k_base (K,), pass_at_k_rl (K,) and crossover_k (`first_crossing`: the first k in ks
    with rl < base).
    """
    for name, p in (("p_a_base", p_a_base), ("p_b_base", p_b_base), ("p_a_rl", p_a_rl), ("p_b_rl", p_b_rl)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} = {p} must be a probability in [0, 1]")
    ks = np.arange(1, 65) if ks is None else np.atleast_1d(np.asarray(ks, dtype=np.int64))
    if (ks < 1).any():
        raise ValueError(f"k = {ks[ks < 1][0]} must be >= 1")

    def curve(p_a: float, p_b: float) -> np.ndarray:
        return ((1.0 - (1.0 - p_a) ** ks) + (1.0 - (1.0 - p_b) ** ks)) / 2  # (K,)

    base, rl = curve(p_a_base, p_b_base), curve(p_a_rl, p_b_rl)
    return {
        "ks": ks,
        "pass_at_k_base": base,
        "pass_at_k_rl": rl,
        "crossover_k": first_crossing(ks, base, rl),
    }


# ---------------------------------------------------------------------------------------------
def unit_key(name: str, seed: int, rep: int = 0) -> str:
    """A scored model's key in the counts file: "grpo/seed3", and "grpo/seed3-g1" for GRPO seed 1."""
    return f"{name}/seed{seed}" if rep == 0 else f"{name}/seed{seed}-g{rep}"


def curve_rows(c: np.ndarray, n: int, k_max: int) -> np.ndarray:
    """Mean pass@k at every k = 1..k_max, per row: (S, P) -> (S, k_max)."""
    return np.stack([pass_at_k_curve(row, n, np.arange(1, k_max + 1))[1] for row in c])


def table_rows(c: np.ndarray, n: int, k_max: int) -> np.ndarray:
    """pass@k per problem at every k = 1..k_max, per row: (S, P) -> (S, P, k_max)."""
    return np.stack([_table(row, n, np.arange(1, k_max + 1)) for row in c])


def mean_crossing(diff: np.ndarray) -> int:
    """The crossover of a mean difference curve RL - SFT at k = 1..K (K,): the first k where it is
    below 0, with RL ahead at k = 1; 0 when RL is not ahead at k = 1, K + 1 when it never falls
    below (so that every outcome is a number an interval can hold)."""
    if not diff[0] > 0:
        return 0
    below = np.flatnonzero(diff < 0)
    return int(below[0]) + 1 if below.size else diff.size + 1


def crossing_interval(d: np.ndarray, resamples: int, seed: int) -> tuple[int, list[float]]:
    """The crossover of the chain-mean curves and its 95% bootstrap interval, resampling chains and
    problems together. d (C, P, K): per chain, per problem, RL's pass@k minus its own SFT chain's.

    Written here: chains and problems are crossed factors of one array, each resampled on its own
    axis (weights W (R, C) and U (R, P)); `scipy.stats.bootstrap` resamples whole observations of
    one axis (or each sample apart), so it cannot draw this two-way resample."""
    C, P, K = d.shape
    rng = np.random.default_rng(seed)
    W = rng.multinomial(C, np.full(C, 1 / C), size=resamples)  # (R, C) times each chain is drawn
    U = rng.multinomial(P, np.full(P, 1 / P), size=resamples)  # (R, P) and each problem
    curves = np.einsum("rc,cpk,rp->rk", W, d, U) / (C * P)  # (R, K)
    ks = [mean_crossing(row) for row in curves]
    lo, hi = np.quantile(ks, [0.025, 0.975])
    return mean_crossing(d.mean(axis=(0, 1))), [float(lo), float(hi)]


def one_sided_problems(c_sft: list, c_seeds: list, prompts: list[str]) -> dict[str, list[dict]]:
    """The problems only one side ever solves: SFT (c > 0 in any of its chains, c_sft) but the variant
    in none of its seeds (c_seeds), and the reverse. Each listed with its prompt, every SFT chain's
    count and every seed's count."""
    c_base = np.stack([np.asarray(c) for c in c_sft])  # (C, P)
    c_all = np.stack([np.asarray(c) for c in c_seeds])  # (S, P)
    rl_never, base_never = (c_all == 0).all(axis=0), (c_base == 0).all(axis=0)  # (P,) each

    def rows(mask: np.ndarray) -> list[dict]:
        return [
            {"prompt": prompts[i], "c_sft": c_base[:, i].tolist(), "c_seeds": c_all[:, i].tolist()}
            for i in np.flatnonzero(mask)
        ]

    return {"sft_only": rows(~base_never & rl_never), "rl_only": rows(base_never & ~rl_never)}
