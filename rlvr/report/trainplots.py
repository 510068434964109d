"""The figures drawn over training steps: the GRPO learning curves of a chapter's variants (stage
`report`) and the reward-hacking run (stage `hack`). Every curve is the mean over chains with its 95%
band over chains, cut to the range the metric can take; the canvas, legend and save helpers are
rlvr.report.plots'.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np

from rlvr.report.plots import labelled, legend_below, new_figure, palette, read_tsv, save
from rlvr.stats import metric_bounds


def _floats(rows: list[dict], key: str) -> list[float]:
    """A TSV column as floats; a blank cell (no value at that step) is NaN."""
    return [float(r[key]) if r[key] != "" else math.nan for r in rows]


def chain_band(
    per_seed: list[list[float]], bounds: tuple[float, float]
) -> tuple[list[float], list[float], list[float]]:
    """(mean, lo, hi) per step over chains: the mean and its 95% t-interval, the interval cut to
    `bounds`, the range the metric can take (`rlvr.report.compare.metric_bounds`: an accuracy's band
    stops at 0 and 1, a KL's at 0); with one chain, no interval (lo = hi = mean). A step where a chain
    has no value (NaN: dynamic sampling kept no group, or a run with a controlled end had stopped) is
    averaged over the chains that have one, and left out (NaN) where fewer than half of them do: a
    mean over the few slow runs still going would be theirs, not the chains'.
    per_seed: (S, T) values, one row per chain."""
    from rlvr.stats import mean_ci

    mean, lo, hi = [], [], []
    enough = max(1, math.ceil(len(per_seed) / 2))  # past the point where most runs stopped: no mean
    for column in zip(*per_seed, strict=True):  # (S,) at one step
        defined = [v for v in column if v == v]
        m, low, high = mean_ci(defined) if len(defined) >= enough else (math.nan, math.nan, math.nan)
        low, high = (m, m) if low is None else (max(low, bounds[0]), min(high, bounds[1]))
        mean.append(m), lo.append(low), hi.append(high)
    return mean, lo, hi


CHAIN_LINE = {"lw": 0.5, "alpha": 0.35}  # one chain: thin and faint, under its mean


def _band(ax, x, per_seed: list[list[float]], label: str, bounds: tuple[float, float], **style) -> None:
    """`chain_band` drawn: one thin line per chain, the band (none with one chain) shaded over them,
    the chain mean on top. A mean hides whether one chain or all of them moved: the thin lines say."""
    mean, lo, hi = chain_band(per_seed, bounds)

    def defined(ys):  # a line through a series' own points: a NaN (no value there) is no gap
        keep = [i for i, y in enumerate(ys) if y == y]
        return [x[i] for i in keep], [ys[i] for i in keep]

    if len(per_seed) > 1:
        for values in per_seed:
            ax.plot(*defined(values), color=style["color"], **CHAIN_LINE)
        band = [i for i, m in enumerate(mean) if m == m]
        ax.fill_between(
            [x[i] for i in band],
            [lo[i] for i in band],
            [hi[i] for i in band],
            color=style["color"],
            alpha=0.12,
            lw=0,
        )
    ax.plot(*defined(mean), lw=1.6, label=label, **style)


def chain_key(color: str = "tab:gray") -> tuple:
    """A legend entry for the thin lines: (handle, label)."""
    from matplotlib.lines import Line2D

    return Line2D([], [], color=color, **CHAIN_LINE), "one chain (thin lines)"


def _rolling(values: list[float], window: int) -> list[float]:
    """Trailing mean over `window` points (fewer at the start): per-step training metrics are
    one batch each, too noisy to compare variants by eye."""
    return [float(np.mean(values[max(0, i - window + 1) : i + 1])) for i in range(len(values))]


LEARNING_PANELS = (  # (curve table, column, panel title, y axis with its unit)
    ("train", "reward_mean", "training reward", "reward (share of samples correct)"),
    ("eval", "eval_acc", "accuracy on the evaluation problems", "accuracy (share correct)"),
    ("train", "kl_k3_nats", "KL to the reference (k3 estimator)", "KL (nats per response)"),
    ("train", "entropy_nats", "policy entropy", "entropy (nats per token)"),
)


def _series(curves: dict[str, list[list[dict]]], table: str, key: str, window: int) -> tuple[list, list]:
    """One metric of one variant as (steps, per-chain values (S, T)): training metrics smoothed by a
    trailing mean over `window` steps; runs with a controlled end stop at different steps, so every
    run is lined up by step, NaN where it had stopped (or was not evaluated). ([], []) where the
    variant does not log the metric."""
    seeds = curves[table]
    if not seeds or key not in seeds[0][0]:
        return [], []
    values = [_floats(rows, key) for rows in seeds]
    if table == "train":
        values = [_rolling(v, window) for v in values]
    steps = sorted({int(r["step"]) for rows in seeds for r in rows})
    at = [dict(zip((int(r["step"]) for r in rows), v)) for rows, v in zip(seeds, values)]
    return steps, [[a.get(step, math.nan) for step in steps] for a in at]


SPIKE_QUANTILE = 0.99  # a panel's scale stops at this quantile of its chains' values (x 1.15)


def clip_spikes(ax, per_chain: list[list[float]]) -> None:
    """Keep one chain's spike from setting a panel's scale: where the largest value lies beyond the
    SPIKE_QUANTILE of all values drawn (by more than a third), the axis stops there (x 1.15) and the
    panel says which peak it cut, so the other curves stay readable and nothing is hidden silently."""
    values = [v for chain in per_chain for v in chain if v == v]
    if len(values) < 20:
        return
    top, peak = float(np.quantile(values, SPIKE_QUANTILE)) * 1.15, max(values)
    if peak > top * 1.33 and top > 0:
        ax.set_ylim(top=top)
        ax.text(
            0.98,
            0.96,
            f"clipped: a peak of {peak:.3g}",
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=7,
            color="0.3",
        )


def _window(runs: dict) -> int:
    """The trailing mean's window: 1/20 of the longest run's training steps."""
    steps = max((max(len(t) for t in c["train"]) for c in runs.values() if c["train"]), default=1)
    return max(1, steps // 20)


GRID_FROM = 7  # from this many variants on, one panel per metric merges them: a row each instead


def learning_curves(
    runs: dict[str, dict[str, list[list[dict]]]],
    title: str,
    path: Path,
    labels: dict[str, str],
    reference: str | None = None,
) -> Path:
    """GRPO learning curves, one colour per variant: chain mean with its 95% band over chains.
    runs: variant -> {"train": [one seed's training rows, ...], "eval": [one seed's evaluation rows, ...]}
    (the curve TSVs as read); labels: variant -> its legend entry. Training metrics are smoothed by a
    trailing mean over 1/20 of the run. From GRID_FROM variants on, with a `reference` among them,
    the variants would merge on one panel: `learning_grid` draws each against the reference."""
    if reference in runs and len(runs) >= GRID_FROM:
        return learning_grid(runs, reference, title, path, labels)
    fig = new_figure((12, 7.2))
    axes = fig.subplots(2, 2).ravel()
    window = _window(runs)
    drawn: dict[int, list] = {i: [] for i in range(len(LEARNING_PANELS))}
    for colour, (variant, curves) in zip(palette(len(runs)), runs.items()):
        for i, (ax, (table, key, _, _)) in enumerate(zip(axes, LEARNING_PANELS)):
            steps, values = _series(curves, table, key, window)
            if steps:
                _band(ax, steps, values, labels[variant], metric_bounds(key), color=colour)
                drawn[i] += values
    for i, ax in enumerate(axes):
        clip_spikes(ax, drawn[i])
    smooth = f", trailing mean of {window} steps" if window > 1 else ""
    for ax, (table, _, panel_title, unit) in zip(axes, LEARNING_PANELS):
        ax.set(title=panel_title + (smooth if table == "train" else ""), xlabel="GRPO step", ylabel=unit)
        ax.grid(alpha=0.3)
    legend_below(fig, [*labelled(axes), chain_key()])
    fig.suptitle(
        textwrap.fill(title + "; chain mean, its 95% band over chains and each chain", 150), fontsize=11
    )
    return save(fig, path)


REFERENCE = {"color": "0.45"}  # the reference variant, grey in every row of a grid


def learning_grid(
    runs: dict[str, dict[str, list[list[dict]]]],
    reference: str,
    title: str,
    path: Path,
    labels: dict[str, str],
) -> Path:
    """Small multiples of `learning_curves`: a row per variant other than `reference`, a column per
    metric (LEARNING_PANELS). Every cell holds the reference (grey) and the row's variant (blue),
    each as its chain mean, 95% band over chains and each chain thin, so a variant is read
    against the run it is one change from; a column shares its y axis, so rows compare too."""
    others = [v for v in runs if v != reference]
    fig = new_figure((12, 1.45 * len(others) + 1.6))
    axes = fig.subplots(len(others), len(LEARNING_PANELS), sharex=True, sharey="col", squeeze=False)
    window = _window(runs)
    smooth = f", trailing mean of {window} steps" if window > 1 else ""
    colour = "tab:blue"  # one strong colour: a row is one variant, named at its left
    drawn: dict[int, list] = {i: [] for i in range(len(LEARNING_PANELS))}
    for row, variant in enumerate(others):
        for col, (ax, (table, key, _, _)) in enumerate(zip(axes[row], LEARNING_PANELS)):
            for name, style in ((reference, REFERENCE), (variant, {"color": colour})):
                steps, values = _series(runs[name], table, key, window)
                if steps:
                    drawn[col] += values
                    _band(
                        ax,
                        steps,
                        values,
                        labels[name] if name == reference else None,
                        metric_bounds(key),
                        **style,
                    )
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
        axes[row][0].set_ylabel(textwrap.fill(labels[variant], 18), fontsize=8.5, fontweight="bold")
    for col, ax in enumerate(axes[0]):  # a column shares its y axis: one clip for the column
        clip_spikes(ax, drawn[col])
    for ax, (table, _, panel_title, unit) in zip(axes[0], LEARNING_PANELS):
        ax.set_title(
            textwrap.fill(f"{panel_title}: {unit}" + (smooth if table == "train" else ""), 40), fontsize=9
        )
    for ax in axes[-1]:
        ax.set_xlabel("GRPO step", fontsize=8)
    legend_below(fig, [*labelled(axes[0][:1]), chain_key()])
    fig.suptitle(
        textwrap.fill(
            title + f"; each variant (a row, blue) against {reference} (grey, every row): chain mean, "
            "its 95% band over chains and each chain",
            150,
        ),
        fontsize=11,
    )
    return save(fig, path)


HACK_LINES = (  # the hack figure's lines in drawing order: (panel, curve column, legend label, style)
    (0, "reward_mean", "substring reward", {"color": "tab:red"}),
    (0, "accuracy", "exact accuracy", {"color": "tab:blue"}),
    (0, "final_answer_acc", "final-answer accuracy", {"color": "tab:green", "ls": "--"}),
    (1, "digits_per_response", "digits", {"color": "tab:purple"}),
    (1, "distinct_digits_per_response", "distinct digits", {"color": "tab:orange"}),
)


def hack_curves(curves: dict[int, Path], figure_path: Path, start: str, variant: str) -> Path:
    """Hacked reward vs exact and final-answer accuracy over steps, and digits per response.
    curves: seed -> that seed's curve TSV; start: what the title calls the SFT start the chains
    begin from (`rlvr.report.labels.sft_label`); variant: whose GRPO loop settings they ran."""
    seeds = list(curves)
    fig = new_figure((9, 3.6))
    fig.suptitle(
        f"GRPO ({variant}'s loop) on the substring verifier from {start}:\n"
        f"mean of {len(seeds)} chains, its 95% band over chains and each chain",
        fontsize=10,
    )
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    tables = [[r for r in read_tsv(curves[seed]) if r["reward_mean"] != ""] for seed in seeds]
    step = [int(r["step"]) for r in tables[0]]
    for panel, key, label, style in HACK_LINES:
        per_seed = [[float(r[key]) for r in rows] for rows in tables]  # (S, T)
        _band((left, right)[panel], step, per_seed, label, metric_bounds(key), **style)
    left.set(
        xlabel="GRPO step",
        ylabel="share of samples",
        title="hacked reward vs true accuracy",
        ylim=(0, 1.02),
    )
    right.set(xlabel="GRPO step", ylabel="digits per response", title="digits per response")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    legend_below(fig, [*labelled((left, right)), chain_key()])
    return save(fig, figure_path)
