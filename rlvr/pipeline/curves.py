"""Training curves as tables: one row per step, as the stages write them (TSV) and plot them.

A run's curve mixes two cadences: every step trains, every `eval_every` steps also evaluates. The
tables keep them apart, so that no cell is empty (DVC draws an empty cell as 0, a comb), and a
variant's seeds are summarised per step as a mean with its 95% band.
"""

from __future__ import annotations

from rlvr.stats import mean_ci

EVAL_COLUMNS = ("eval_acc", "eval_kl_exact_nats")


def split_curve(curve: list[dict]) -> tuple[list[dict], list[dict]]:
    """A run's rows as (training steps, evaluations): every column of a training step but the
    evaluation's, and (step, evaluation columns) for each step that was evaluated. Each table then
    has a value in every cell (the evaluation runs every `eval_every` steps, training every step)."""
    train = [{k: v for k, v in r.items() if k not in EVAL_COLUMNS} for r in curve if r["step"] > 0]
    evals = [{"step": r["step"], **{k: r[k] for k in EVAL_COLUMNS}} for r in curve if EVAL_COLUMNS[0] in r]
    return train, evals


def curve_band(
    curves: list[list[dict]], key: str, bounds: tuple[float, float] = (0.0, 1.0), chains: list | None = None
) -> list[dict]:
    """Run curves -> one row per step: the chain mean of `key` and its 95% t-interval over chains
    (`{key}_lo`, `{key}_hi`; equal to the mean with a single chain), cut to `bounds`, the range the
    quantity can take (an accuracy's band does not go below 0). `chains` names each curve's chain:
    runs nested in one chain (its GRPO seeds) are averaged first, so the band is over independent
    chains, not over runs that share a start. Runs with a controlled end stop at different steps: a
    step's row is over the chains still training there (`seeds`: how many)."""
    chains = list(range(len(curves))) if chains is None else chains
    steps = sorted({r["step"] for c in curves for r in c})
    at = [{r["step"]: r[key] for r in c} for c in curves]
    rows = []
    for step in steps:
        per_chain: dict = {}
        for chain, values in zip(chains, at):
            if step in values:
                per_chain.setdefault(chain, []).append(values[step])
        if not per_chain:
            continue
        mean, lo, hi = mean_ci([sum(v) / len(v) for v in per_chain.values()])
        rows.append(
            {
                "step": step,
                key: mean,
                f"{key}_lo": max(bounds[0], mean if lo is None else lo),
                f"{key}_hi": min(bounds[1], mean if hi is None else hi),
                "seeds": len(per_chain),
            }
        )
    return rows
