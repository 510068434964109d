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


def curve_band(curves: list[list[dict]], key: str, bounds: tuple[float, float] = (0.0, 1.0)) -> list[dict]:
    """Seed curves (the same steps in each) -> one row per step: the seed mean of `key` and its 95%
    t-interval (`{key}_lo`, `{key}_hi`; equal to the mean with a single seed), cut to `bounds`, the
    range the quantity can take (an accuracy's band does not go below 0)."""
    rows = []
    for at_step in zip(*curves, strict=True):
        mean, lo, hi = mean_ci([r[key] for r in at_step])
        rows.append(
            {
                "step": at_step[0]["step"],
                key: mean,
                f"{key}_lo": max(bounds[0], mean if lo is None else lo),
                f"{key}_hi": min(bounds[1], mean if hi is None else hi),
                "seeds": len(at_step),
            }
        )
    return rows
