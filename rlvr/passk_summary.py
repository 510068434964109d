"""The passk stage's numbers over chains: chain s is SFT seed s and the GRPO seeds s trained from it.

The SFT start is itself a random draw, so every interval here is over chains (or seeds), not
problems, and each variant seed is compared (`rlvr.passk.compare`) with the SFT policy it was
trained from. Input: the counts file's layout, "{name}/seed{s}" -> per-problem correct counts
(`rlvr.passk.unit_key`); output: the metrics and curves the stage writes.
"""

from __future__ import annotations

import numpy as np

from rlvr.passk import (
    compare,
    crossing_interval,
    crossing_label,
    curve_rows,
    first_crossing,
    grid_crossing,
    never_solved_in,
    one_run_sd,
    pass_at_k,
    table_rows,
    unit_key,
)


def _seed_mean(rows: list[dict], key: str):
    vals = [r[key] for r in rows if r[key] is not None]
    return float(np.mean(vals)) if vals else None


SEED_KEYS = (
    "pass_at_1_rl",
    "pass_at_n_rl",
    "never_solved_rl",
    "solved_by_base_only",
    "solved_by_rl_only",
    "wilcoxon_pvalue_at_1",
    "wilcoxon_pvalue_at_n",
    "chapter_sd_pass_at_1_rl",
    "chapter_sd_pass_at_n_rl",
)


def _chain_counts(counts: dict, name: str, seeds: list[int], rep: int = 0) -> np.ndarray:
    """The counts of GRPO seed `rep` of "{name}/seed{s}" for each seed, stacked: (S, P); a
    ValueError naming a missing key."""
    keys = [unit_key(name, s, rep) for s in seeds]
    missing = [k for k in keys if k not in counts]
    if missing or not seeds:
        raise ValueError(f"no counts for {missing[0]}" if missing else f"{name} has no seeds to score")
    return np.stack([np.asarray(counts[k]) for k in keys])  # (S, P)


def _start_summary(c: np.ndarray, n: int, k_max: int, seeds: list[int]) -> dict:
    """One SFT run over its chains, c (S, P): chain means of pass@1, pass@k_max and the expected
    never-solved count in k_max samples at the top level, then `seeds`, `per_seed`, `ci95` (t-interval
    over chains), `variance` (the SD a chain's value owes to its start and to our evaluation) and
    one run's evaluation noise at the chapter's n = k_max."""
    from rlvr.stats import seed_metrics, variance_components

    per_chain = {
        s: {
            "pass_at_1": float(pass_at_k(row, n, 1).mean()),
            "pass_at_n": float(pass_at_k(row, n, k_max).mean()),
            "never_solved": never_solved_in(row, n, k_max),
            "chapter_sd_pass_at_1": one_run_sd(row, n, 1, k_max),
            "chapter_sd_pass_at_n": one_run_sd(row, n, k_max, k_max),
        }
        for s, row in zip(seeds, c)
    }
    out = {**seed_metrics(per_chain), "seeds": list(seeds), "samples_per_problem": int(n)}
    sd = {"pass_at_1": lambda r: one_run_sd(r, n, 1, n), "pass_at_n": lambda r: one_run_sd(r, n, k_max, n)}

    out["variance"] = {
        key: variance_components(
            [[v] for v in out["per_seed"][key]], float(np.mean([sd[key](row) for row in c]))
        )
        for key in sd
    }
    P = c.shape[1]
    out["variance"]["never_solved"] = {k: v * P for k, v in out["variance"]["pass_at_n"].items()}
    return out


def summarise_counts(
    counts: dict[str, list[int]],
    chains: dict[str, list[int]],
    n: int | dict[str, int],
    ks,
    resamples: int,
    seed: int,
    contrast: str | None = None,
    reps: dict[str, int] | None = None,
    k_max: int | None = None,
) -> tuple[dict, dict[str, list[dict]]]:
    """Per-problem counts of "{name}/seed{s}" (and "{name}/seed{s}-g{r}", GRPO seed r of chain s)
    -> (metrics, curves). chains: "sft", the `contrast` run (if given) and every variant -> its
    seeds; a variant's seeds must be SFT seeds, since variant seed s is trained from, and compared
    with, SFT seed s. n: samples per problem, one for all or per name; reps: GRPO seeds per chain of
    each variant (default 1); k_max: the largest k (default the smallest n).

    metrics: per SFT run ("sft", "contrast"), chain means of pass@1 / pass@k_max / never-solved with
    per-chain values, 95% t-intervals over chains and variance sources; per variant, each chain's
    value (the mean over its GRPO seeds) of `compare` against its own chain's SFT counts, their mean,
    every seed's value (`per_rep`), the variance sources, per-chain crossovers (a k or why none), and
    the crossover of the chain-mean curves with a bootstrap interval over chains and problems.
    curves: model -> one row per k = 1..k_max: an SFT run's chain-mean pass@k with its t-interval
    over chains; a variant's chain-mean pass@k with its interval, and its paired difference from SFT.
    """
    from rlvr.stats import variance_components

    n_of = (lambda name: n[name]) if isinstance(n, dict) else (lambda name: n)  # noqa: E731
    reps = reps or {}
    chains = {name: sorted(seeds) for name, seeds in chains.items()}
    starts = {"sft": "sft"} if contrast is None else {"sft": "sft", "contrast": contrast}
    k_max = k_max or min(n_of(name) for name in chains)
    sft = _chain_counts(counts, "sft", chains.get("sft", []))  # (C, P)
    metrics = {
        "n": n_of("sft"),
        "k_max": k_max,
        "problems": int(sft.shape[1]),
        "ks": sorted(set(ks) | {1, k_max}),
    }
    curves = {}
    for key, name in starts.items():
        c = _chain_counts(counts, name, chains.get(name, []))  # (C, P)
        metrics[key] = _start_summary(c, n_of(name), k_max, chains[name])
        curves[name] = [
            {"k": k, **_band(col, "pass_at_k", "ci95")}
            for k, col in enumerate(curve_rows(c, n_of(name), k_max).T, 1)
        ]
    if contrast is not None:
        metrics["contrast"]["run"] = contrast
    n_sft = n_of("sft")
    sft_curve = dict(zip(chains["sft"], curve_rows(sft, n_sft, k_max)))  # seed -> (K,)
    sft_table = dict(zip(chains["sft"], table_rows(sft, n_sft, k_max)))  # seed -> (P, K)
    sft = dict(zip(chains["sft"], sft))  # seed -> (P,)
    metrics["variants"] = {}
    for v in (v for v in chains if v not in starts.values()):
        for s in chains[v]:
            if s not in sft:
                raise ValueError(
                    f"{v}/seed{s} has no SFT chain to compare with: no counts for sft/seed{s} "
                    f"(SFT seeds {chains['sft']})"
                )
        R, n_v = reps.get(v, 1), n_of(v)
        c = [_chain_counts(counts, v, chains[v], r) for r in range(R)]  # R x (S_v, P)
        rows = [  # per chain, per GRPO seed
            [compare(sft[s], c[r][i], n_sft, ks, resamples, seed, n_v, k_max) for r in range(R)]
            for i, s in enumerate(chains[v])
        ]
        per_rep = {k: [[row[k] for row in chain] for chain in rows] for k in SEED_KEYS}
        per_chain = {k: [_seed_mean([{k: x} for x in vals], k) for vals in per_rep[k]] for k in SEED_KEYS}
        rl_tables = np.mean([table_rows(c[r], n_v, k_max) for r in range(R)], axis=0)  # (S_v, P, K)
        d = rl_tables - np.stack([sft_table[s] for s in chains[v]])  # (S_v, P, K) paired by chain
        chain_diff = d.mean(axis=1)  # (S_v, K)
        grid = np.arange(1, k_max + 1)
        labels = []
        for i, s in enumerate(chains[v]):  # each chain's own crossover, or why it has none
            base, rl = sft_curve[s], sft_curve[s] + chain_diff[i]
            k = first_crossing(grid, base, rl)
            labels.append(str(k) if k is not None else crossing_label(grid, base, rl))
        mean_k, mean_k_ci = crossing_interval(d, resamples, seed)
        for k in metrics["ks"]:  # the paired difference RL - SFT at each k of the chapter's grid
            per_chain[f"minus_sft_at_{k}"] = [float(x) for x in chain_diff[:, k - 1]]
        entry = {k: _seed_mean([{k: x} for x in vals], k) for k, vals in per_chain.items()}
        on_grid = [grid_crossing(metrics["ks"], chain_diff[i]) for i in range(len(chains[v]))]
        entry.update(
            seeds=chains[v],
            grpo_seeds=R,
            samples_per_problem=n_v,
            per_seed=per_chain,
            per_rep=per_rep,
            variance={
                key: variance_components(
                    per_rep[key],
                    float(
                        np.mean(
                            [row[f"eval_sd_{key.removesuffix('_rl')}_rl"] for chain in rows for row in chain]
                        )
                    )
                    if f"eval_sd_{key.removesuffix('_rl')}_rl" in rows[0][0]
                    else None,
                )
                for key in ("pass_at_1_rl", "pass_at_n_rl")
            },
            crossover_k=mean_k,
            crossover_k_ci95=mean_k_ci,
            crossover_per_chain=labels,
            # each chain's first k of the chapter's grid (1, 2, 4, ..., 64) where RL falls below SFT,
            # RL ahead at k = 1 (None: it never falls below on the grid, or is not ahead at k = 1)
            crossover_grid_per_chain=on_grid,
            # the same as numbers, for DVC's metrics (which drop lists and cannot diff a string)
            chains=len(labels),
            chains_crossing=sum(label.isdigit() for label in labels),
        )
        entry["variance"]["never_solved_rl"] = {
            k: x * metrics["problems"] for k, x in entry["variance"]["pass_at_n_rl"].items()
        }
        metrics["variants"][v] = entry
        per_seed = np.mean([curve_rows(c[r], n_v, k_max) for r in range(R)], axis=0)  # (S_v, K)
        minus_sft = per_seed - np.stack([sft_curve[s] for s in chains[v]])  # (S_v, K) paired by chain
        curves[v] = [
            {"k": k, **_band(a, "pass_at_k"), **_band(dd, "minus_sft")}
            for k, a, dd in zip(range(1, k_max + 1), per_seed.T, minus_sft.T)
        ]
    return metrics, curves


def _band(values: np.ndarray, name: str, interval: str | None = None) -> dict:
    """{name: mean, name_lo, name_hi}: the 95% t-interval over seeds or chains (the mean itself with
    one), cut to what the quantity can take (pass@k: [0, 1]; its difference from SFT's, `minus_sft`:
    [-1, 1]); the bounds are named {interval}_lo / _hi instead if `interval` is given."""
    from rlvr.stats import clip, mean_ci

    mean, lo, hi = mean_ci([float(x) for x in values])
    bound = interval or name
    lo, hi = clip(mean if lo is None else lo, mean if hi is None else hi, PASSK_BOUNDS[name])
    return {name: float(mean), f"{bound}_lo": float(lo), f"{bound}_hi": float(hi)}


PASSK_BOUNDS = {"pass_at_k": (0.0, 1.0), "minus_sft": (-1.0, 1.0)}  # a rate, a difference of two
