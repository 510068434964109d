"""Where RL narrows coverage: pass@k of an SFT start and of RL from it, chain by chain, at each
sampling temperature, and the paired difference over chains that decides it.

RL is said to narrow a start when its pass@k at large k falls below the start's: it solves the
problems it already solved more reliably and stops reaching some others (chapter B, after Yue et
al., 2025, who sampled at T = 0.6). A chain is one SFT start and the RL run(s) trained from it, so
the difference is taken per chain (each RL run against its own start) and its interval is over
chains: the start's own variance is inside it. Pure numpy, vectorised over problems.

Counts are as the pass@k stage and `rlvr starts` write them: "{model}/seed{s}" (and "-g{r}" for
GRPO seed r > 0) -> correct samples out of n per problem.
"""

from __future__ import annotations

import math

import numpy as np

from rlvr.passk import pass_at_k, unit_key
from rlvr.stats import mean_ci

# What a paired difference's 95% interval says about RL against its start (or one RL against another).
BELOW, ABOVE, ZERO, ACROSS = "below 0", "above 0", "0 on every chain", "across 0"


def temperature_key(t: float) -> str:
    """A temperature as a JSON key and a label: 1.0 -> "1", 0.6 -> "0.6"."""
    return f"{t:g}"


def chain_pass_at(counts: dict, name: str, seeds: list[int], n: int, k: int, reps: int = 1) -> list[float]:
    """Mean pass@k over problems of `name`'s run on each chain in `seeds`, averaged over its `reps`
    GRPO seeds: [one value per chain]. A ValueError names the first missing run."""
    out = []
    for s in seeds:
        values = []
        for r in range(reps):
            key = unit_key(name, s, r)
            if key not in counts:
                raise ValueError(f"no counts for {key}")
            values.append(float(pass_at_k(np.asarray(counts[key]), n, k).mean()))
        out.append(float(np.mean(values)))
    return out


def paired_difference(a: list[float], b: list[float]) -> dict:
    """b - a chain by chain: {"mean", "ci95" ([lo, hi], the Student-t 95% interval over chains,
    clipped to [-1, 1], where a difference of two shares can lie; None with one chain),
    "per_chain", "chains", "direction" (`direction`)}."""
    if len(a) != len(b) or not a:
        raise ValueError(
            f"a paired difference needs one value per chain on each side, got {len(a)} and {len(b)}"
        )
    d = [float(y - x) for x, y in zip(a, b)]
    mean, lo, hi = mean_ci(d)
    ci = None if lo is None else [max(lo, -1.0), min(hi, 1.0)]
    out = {"mean": mean, "ci95": ci, "per_chain": d, "chains": len(d)}
    out["direction"] = direction(out)
    return out


def direction(diff: dict) -> str:
    """Where a paired difference's interval lies: BELOW (wholly below 0), ABOVE (wholly above),
    ZERO (no chain differs at all) or ACROSS (it holds 0, or one chain gives no interval)."""
    if all(x == 0 for x in diff["per_chain"]):
        return ZERO
    ci = diff["ci95"]
    if ci is None or math.isnan(ci[0]):
        return ACROSS
    return BELOW if ci[1] < 0 else ABOVE if ci[0] > 0 else ACROSS


def rl_minus_start(
    counts: dict,
    rl: str,
    seeds: list[int],
    n_start: int,
    n_rl: int,
    k: int,
    reps: int = 1,
    start: str = "sft",
) -> dict:
    """RL's pass@k minus its own start's, chain by chain (`paired_difference`), on the chains in `seeds`."""
    return paired_difference(
        chain_pass_at(counts, start, seeds, n_start, k), chain_pass_at(counts, rl, seeds, n_rl, k, reps)
    )


def greedy_summary(greedy: dict, name: str, seeds: list[int], reps: int = 1) -> dict:
    """Greedy pass@1 of `name` (one greedy sample per problem: 0/1 counts) per chain, the mean over
    a chain's GRPO seeds, and its chain mean with the 95% t-interval over chains."""
    per_chain = chain_pass_at(greedy, name, seeds, 1, 1, reps)
    mean, lo, hi = mean_ci(per_chain)
    ci = None if lo is None else [max(lo, 0.0), min(hi, 1.0)]  # a share: within [0, 1]
    return {"pass_at_1": mean, "ci95": ci, "per_chain": per_chain, "seeds": list(seeds)}
