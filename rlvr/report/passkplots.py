"""The pass@k figures: the chain-mean curves with their bands and the difference from SFT, the
candidate starts' curves, each problem's solve rate before and after GRPO, and their distribution.
Drawn from the passk stage's curves and counts (`rlvr.passk_summary`), with the canvas, legend and
save helpers of `rlvr.report.plots`.
"""

from __future__ import annotations

import statistics
import textwrap
from pathlib import Path

import numpy as np

from rlvr.report.compare import delta_bounds
from rlvr.report.plots import figure_title, labelled, legend_below, new_figure, palette, save
from rlvr.stats import metric_bounds

PASS_BOUNDS = metric_bounds("pass_at_k")  # a pass@k band stops at 0 and 1, a difference of two at -1, 1


def _within(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


def _k_axis(ax, n: int) -> None:
    """A log2 axis for k with every power of two labelled: 1, 2, 4, ..., n."""
    ticks = [2**i for i in range(n.bit_length()) if 2**i <= n]
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlim(1, n)


def unsolved_floor(problems: int) -> float:
    """Where 1 - pass@k is drawn once every problem is solved (0 has no place on a log axis): half a
    problem's share, below any share a count of problems can take."""
    if problems < 1:
        raise ValueError(f"pass@k over {problems} problems: no share of them to draw")
    return 0.5 / problems


def _unsolved_axes(ax, n: int, title: str) -> None:
    """The axes of 1 - pass@k, the share of problems still unsolved after k samples: log scale, so
    the large-k end, where a start catches up, reads as well as k = 1."""
    ax.set_yscale("log")
    ax.set(xlabel="k (samples per problem)", ylabel="1 - pass@k (share of problems unsolved)", title=title)
    _k_axis(ax, n)
    ax.grid(alpha=0.3, which="both")


def crossover_label(variant: str, per_chain: list | None, n: int) -> str:
    """A variant's legend entry: its per-chain crossovers (a k, or why none: `rlvr.passk`'s
    `first_crossing` and `crossing_label`), or "no crossover up to n" when no chain crosses."""
    ks = [c for c in per_chain or [] if str(c).isdigit()]
    if not ks:
        return f"{variant}: no crossover up to {n}"
    return f"{variant}: crosses in {len(ks)} of {len(per_chain)} chains (k = {', '.join(ks)})"


def crossover_words(per_chain: list | None, n: int) -> str:
    """A variant's crossovers for a small panel's title, on two lines: "crosses in 3 of 4 chains:"
    then "k = 8, 18, 21"; past four chains, their range and median ("k = 8 to 34, median 17"), so
    the title stays as wide as its panel."""
    ks = sorted(int(c) for c in per_chain or [] if str(c).isdigit())
    if not ks:
        return f"no crossover up to {n}"
    where = (
        ", ".join(map(str, ks)) if len(ks) <= 4 else f"{ks[0]} to {ks[-1]}, median {statistics.median(ks):g}"
    )
    return f"crosses in {len(ks)} of {len(per_chain)} chains:\nk = {where}"


PANEL_COLUMNS = 4  # the variants' small panels, this many a row


def passk_curves(
    curves: dict[str, list[dict]],
    n: int,
    contrast: str | None,
    path: Path,
    crossovers: dict[str, list],
    labels: dict[str, str],
    *,
    problems: int,
) -> Path:
    """curves: `passk_summary.summarise_counts`'s; crossovers: variant -> its per-chain crossover k (the
    metrics' `per_seed.crossover_k`); labels: "sft" and the contrast -> what the legend calls them
    (`rlvr.report.labels.sft_label`); problems: how many the curves are over.
    The first panel: 1 - pass@k (`_unsolved_axes`) for the SFT start and a contrast if scored (chain
    mean, 95% band over chains) and GRPO (seed mean, band over seeds).
    Then a small panel per variant (a row holds PANEL_COLUMNS, sharing their axes): its pass@k minus
    its chain's SFT's, chain mean with its 95% band, on a symmetric-log axis (linear within +-0.01),
    with grpo's mean in grey beside every other variant; a dot marks each chain's crossover on the
    zero line. Thirteen variants on one panel would merge into one mass."""
    variants = [m for m, rows in curves.items() if rows and "minus_sft" in rows[0]]
    floor = unsolved_floor(problems)
    rows_of_panels = -(-len(variants) // PANEL_COLUMNS)
    fig = new_figure((12, 4.6 + 2.3 * rows_of_panels))
    grid = fig.add_gridspec(1 + rows_of_panels, PANEL_COLUMNS, height_ratios=[2.0] + [1.0] * rows_of_panels)
    left = fig.add_subplot(grid[0, : PANEL_COLUMNS // 2])  # its legend beside it, in the row's other half
    for name, style in (
        ("sft", {"color": "black", "lw": 2}),
        (contrast, {"color": "tab:gray", "lw": 1.5, "ls": "--"}),
        ("grpo", {"color": "tab:blue", "lw": 2}),
    ):
        rows = curves.get(name)
        if not rows:
            continue
        label = f"{labels[name]}: chain mean" if name != "grpo" else "grpo: chain mean"
        ks = [r["k"] for r in rows]
        lo, hi = ("ci95_lo", "ci95_hi") if "ci95_lo" in rows[0] else ("pass_at_k_lo", "pass_at_k_hi")
        miss = lambda key: [max(1 - _within(r[key], PASS_BOUNDS), floor) for r in rows]  # noqa: E731
        left.plot(ks, miss("pass_at_k"), label=label, **style)
        left.fill_between(ks, miss(hi), miss(lo), color=style["color"], alpha=0.2, lw=0)
    _unsolved_axes(left, n, "problems still unsolved after k samples: SFT and grpo")
    panels = []
    for i, v in enumerate(variants):
        first = panels[0] if panels else None  # the panels share both axes
        ax = fig.add_subplot(grid[1 + i // PANEL_COLUMNS, i % PANEL_COLUMNS], sharex=first, sharey=first)
        if v != "grpo" and "grpo" in variants:
            ax.plot(
                [r["k"] for r in curves["grpo"]],
                [r["minus_sft"] for r in curves["grpo"]],
                color="0.5",
                lw=1.2,
                label="grpo (grey, in every other variant's panel)",
            )
        _minus_sft_panel(ax, v, curves[v], crossovers.get(v), n)
        if i % PANEL_COLUMNS == 0:
            ax.set_ylabel("pass@k − SFT's\n(symlog)", fontsize=8)
        panels.append(ax)
    entries = labelled(fig.axes)  # the start's, the contrast's and grpo's, and grpo's grey line
    if entries:  # in the first row's empty half, beside the curves it names
        legend = left.legend(
            *zip(*entries), loc="center left", bbox_to_anchor=(1.04, 0.5), fontsize=8, frameon=False
        )
        legend.set_in_layout(False)  # it sits in the row's empty half: the layout need not make room
    figure_title(
        fig,
        "pass@k on the held-out problems, from each chain's SFT start to each GRPO variant; below: each "
        "variant's pass@k minus its chain's SFT's (chain mean, 95% band over chains, symlog: linear within "
        "±0.01; below 0 SFT solves more; a dot: a chain's crossover)",
        fontsize=10,
    )
    return save(fig, path)


def _minus_sft_panel(ax, variant: str, rows: list[dict], per_chain: list | None, n: int) -> None:
    """One variant's small panel: its pass@k minus SFT's with its band, each chain's crossover."""
    ks = [r["k"] for r in rows]
    ax.axhline(0, color="black", lw=0.8)
    ax.plot(ks, [r["minus_sft"] for r in rows], lw=1.6, color="tab:blue")
    ax.fill_between(
        ks,
        [_within(r["minus_sft_lo"], delta_bounds(PASS_BOUNDS)) for r in rows],
        [_within(r["minus_sft_hi"], delta_bounds(PASS_BOUNDS)) for r in rows],
        color="tab:blue",
        alpha=0.15,
        lw=0,
    )
    for k in sorted({int(k) for k in per_chain or [] if str(k).isdigit()}):
        ax.plot([k], [0], "o", color="tab:blue", ms=5, mec="black", mew=0.6)
    ax.set_yscale("symlog", linthresh=0.01)
    _k_axis(ax, n)
    ax.grid(alpha=0.3, which="both")
    ax.tick_params(labelsize=7, labelbottom=True)  # every panel's k axis, not only the bottom row's
    ax.set_title(f"{variant}\n{crossover_words(per_chain, n)}", fontsize=8)
    ax.set_xlabel("k", fontsize=8)


def starts_passk(
    curves: dict[str, dict], n: int, chosen: str, path: Path, labels: dict[str, str], *, problems: int
) -> Path:
    """`rlvr starts`: 1 - pass@k (the share of validation problems still unsolved after k samples,
    log axis) of every candidate start, SFT dashed and GRPO from it solid, one colour per candidate,
    chain means. curves: candidate -> {"sft": (n,), "grpo": (n,)} pass@k at k = 1..n; labels:
    candidate -> what the legend calls its start (`rlvr.report.labels.sft_label`); problems: how many
    validation problems the curves are over."""
    fig = new_figure((7.5, 4.8 + 0.5 * max(0, len(curves) - 3)))  # room for each candidate's legend rows
    ax = fig.subplots()
    ks = np.arange(1, n + 1)
    floor = unsolved_floor(problems)
    for i, (name, c) in enumerate(curves.items()):
        tag = " (the SFT-side rule's choice)" if name == chosen else ""
        ax.plot(
            ks, np.maximum(1 - c["sft"], floor), color=f"C{i}", ls="--", lw=1.5, label=f"{labels[name]}{tag}"
        )
        ax.plot(ks, np.maximum(1 - c["grpo"], floor), color=f"C{i}", lw=2, label=f"{name}: GRPO from it")
    _unsolved_axes(ax, n, "Chapter B's candidate starts: where GRPO narrows and where it does not")
    legend_below(fig, fontsize=7)
    return save(fig, path)


def _chain_mean(counts: dict, name: str, seeds: list[int], n: int, k: int = 64) -> tuple[np.ndarray, float]:
    """Per-problem solve rate (correct of n) averaged over a model's scored runs (its chains, every
    GRPO seed of each), (P,), and the mean over them of the expected number of problems k samples
    never solve."""
    from rlvr.passk import never_solved_in

    rows = [
        np.asarray(c)
        for key, c in counts.items()
        if key.split("/seed")[0] == name and int(key.split("/seed")[1].split("-")[0]) in seeds
    ]
    c = np.stack(rows)  # (S, P)
    return (c / n).mean(axis=0), float(np.mean([never_solved_in(row, n, k) for row in c]))


def passk_scatter(
    counts: dict,
    chains: dict[str, list[int]],
    samples: dict[str, int],
    k: int,
    path: Path,
    labels: dict[str, str],
) -> Path:
    """Per-problem solve rates: SFT (mean over its chains) against GRPO (mean over its runs).
    counts: "{name}/seed{s}" -> (P,); chains: "sft" and "grpo" -> seeds; samples: name -> n; labels:
    "sft" -> what the axis calls the start. Above the
    diagonal GRPO solves the problem more often; on the x axis GRPO never solves what SFT sometimes
    does."""
    fig = new_figure((5.2, 4.8))
    ax = fig.add_subplot()
    sft_chains, seeds = chains["sft"], chains.get("grpo", [])
    if seeds:
        ax.scatter(
            _chain_mean(counts, "sft", sft_chains, samples["sft"], k)[0],
            _chain_mean(counts, "grpo", seeds, samples["grpo"], k)[0],
            s=12,
            alpha=0.5,
        )
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8)
    ax.set(
        xlabel=textwrap.fill(f"solve rate, {labels['sft']}", 60)
        + f"\n(mean of {len(sft_chains)} chains, {samples['sft']} samples each)",
        ylabel=f"solve rate, grpo (mean of {len(seeds)} chains)",
        title="per-problem solve rates: grpo against its start",
        xlim=(-0.02, 1.02),
        ylim=(-0.02, 1.02),
    )
    ax.grid(alpha=0.3)
    return save(fig, path)


def _ecdf(ax, rates, **style) -> None:
    x = np.sort(np.asarray(rates, dtype=float))  # (P,)
    ax.step(np.concatenate([[0.0], x]), np.arange(len(x) + 1) / len(x), where="post", **style)


def passk_solve_rates(
    counts: dict,
    chains: dict[str, list[int]],
    samples: dict[str, int],
    contrast: str | None,
    path: Path,
    labels: dict[str, str],
    k: int = 64,
) -> Path:
    """Per-problem solve rates c_i / n as ECDFs, each problem's rate averaged over a model's chains
    (SFT) or seeds (variants): the two SFT starts, or with no contrast the SFT start's chains one by
    one (left), SFT against every variant (right). counts:
    "{name}/seed{s}" -> (P,); chains: "sft", `contrast` and every variant -> seeds; labels: "sft" and
    the contrast -> what the legend calls them. A curve's height
    at 0 is the share of problems never solved in any chain or seed; the labels give the mean over
    chains or seeds of the never-solved count. Mass near 0 is what n samples can miss."""
    fig = new_figure((11, 4.2))
    left, right = fig.subplots(1, 2, sharey=True)

    def draw(ax, name, label, unit, **style):
        mean, never = _chain_mean(counts, name, chains[name], samples[name], k)
        c = len(chains[name])
        _ecdf(
            ax,
            mean,
            label=f"{label}: {never:.1f} never solved in {k} (mean of {c} {unit if c > 1 else unit[:-1]})",
            **style,
        )

    draw(left, "sft", labels["sft"], "chains", color="black", lw=2)
    if contrast is None:
        for i, s in enumerate(chains["sft"]):
            rates, _ = _chain_mean(counts, "sft", [s], samples["sft"], k)
            _ecdf(left, rates, color="tab:gray", lw=0.8, alpha=0.7, label=None if i else "one SFT chain each")
    else:
        draw(left, contrast, labels[contrast], "chains", color="tab:gray", lw=2, ls="--")
    left.set(
        title="SFT starts" if contrast is not None else "the SFT start and its chains",
        xlabel="per-problem solve rate",
        ylabel="share of held-out problems at or below",
    )
    draw(right, "sft", labels["sft"], "chains", color="black", lw=2)
    variants = [v for v in chains if v not in ("sft", contrast)]
    for v, colour in zip(variants, palette(len(variants))):
        draw(right, v, v, "chains", lw=1, color=colour)
    right.set(title="SFT and GRPO variants (chain mean)", xlabel="per-problem solve rate")
    for ax in (left, right):
        ax.set_xlim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    fig.suptitle(
        f"Per-problem solve rates in {k} samples, as cumulative shares of the held-out problems",
        fontsize=10,
    )
    legend_below(fig, fontsize=7)
    return save(fig, path)
