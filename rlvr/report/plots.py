"""The figures the pipeline draws, one function each, the canvas, legend and save helpers they
share, and every figure's caption. The worked examples' figures are rlvr.report.workedplots', the
figures over training steps rlvr.report.trainplots', the pass@k figures rlvr.report.passkplots'.

Figures are drawn from what the stages wrote (metrics dicts, curve rows, per-problem counts), never
from live models, so any figure can be redrawn from the committed results. matplotlib is imported
inside the functions (~0.5 s) and only through its object API with an explicit Agg canvas: no pyplot,
no global backend or figure registry.
"""

from __future__ import annotations

import csv
import textwrap
from pathlib import Path

import numpy as np

from rlvr.io.files import atomic_write, svg_beside


def new_figure(figsize: tuple[float, float]):
    """A matplotlib Figure on an Agg canvas, laid out by matplotlib's constrained layout (which
    makes room for a legend placed outside the panels)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def palette(n: int) -> list:
    """n colours a reader can tell apart: matplotlib's ten-colour cycle, or tab20's twenty (dark and
    light of each hue) past ten, so two curves of a legend never share a colour."""
    import matplotlib

    if n <= 10:
        return [f"C{i}" for i in range(n)]
    cmap = matplotlib.colormaps["tab20"]
    if n > cmap.N:
        raise ValueError(f"{n} curves in one figure: at most {cmap.N} can have colours of their own")
    return [cmap(i) for i in range(n)]


def figure_title(fig, text: str, fontsize: float = 12):
    """The figure's title, wrapped to the figure's width (about one character per 0.55 of the font
    size in points, in hundredths of an inch), so a narrow figure (one temperature, one candidate)
    never has a title that runs past its edge."""
    per_line = max(20, int(fig.get_figwidth() * 72 / (0.55 * fontsize)))
    return fig.suptitle(textwrap.fill(text, per_line), fontsize=fontsize)


LEGEND_WRAP = 70  # characters per line of a legend entry: a long run name wraps, never leaves the image


def labelled(axes) -> list[tuple]:
    """(handle, label) of every labelled artist of the panels, each label once, in drawing order."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    return [(h, label) for label, h in seen.items()]


def legend_below(fig, entries: list[tuple] | None = None, fontsize: float = 8):
    """The figure's legend in a strip under its panels, so it neither covers a curve nor leaves the
    image: as many columns as fit the figure's width, entries wrapped at LEGEND_WRAP characters.
    entries: (handle, label) pairs; by default every labelled artist of every panel, once per label."""
    entries = labelled(fig.axes) if entries is None else entries
    handles = [h for h, _ in entries]
    labels = [textwrap.fill(label, LEGEND_WRAP) for _, label in entries]
    renderer = fig.canvas.get_renderer()
    for ncol in range(min(len(labels), 5), 0, -1):
        legend = fig.legend(
            handles, labels, loc="outside lower center", ncol=ncol, fontsize=fontsize, frameon=False
        )
        if legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
            return legend
        legend.remove()
    raise ValueError(f"a legend entry is wider than its {fig.get_figwidth():g} in figure: {labels[0]!r}")


def _past_edge(box, image) -> bool:
    return box.x0 < image.x0 - 1 or box.y0 < image.y0 - 1 or box.x1 > image.x1 + 1 or box.y1 > image.y1 + 1


def layout_problems(fig) -> list[str]:
    """What a reader would miss: a legend or a title that runs past the image's edge, a panel whose
    labels or tick labels do, a legend that lies on a panel (where it hides what the panel plots).
    The figure must have been drawn (saved), so that every artist has its place."""
    problems = []
    image = fig.bbox
    renderer = fig.canvas.get_renderer()
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    for legend in legends:
        box = legend.get_window_extent()
        name = repr(legend.get_texts()[0].get_text() if legend.get_texts() else "")
        if _past_edge(box, image):
            problems.append(f"the legend starting {name} runs past the image's edge")
        if any(ax.get_visible() and box.overlaps(ax.bbox) for ax in fig.axes):
            problems.append(f"the legend starting {name} lies on a panel")
    for text in fig.texts:
        if text.get_visible() and text.get_text() and _past_edge(text.get_window_extent(renderer), image):
            problems.append(f"the title {text.get_text()[:40]!r} runs past the image's edge")
    for ax in fig.axes:
        if ax.get_visible() and _past_edge(ax.get_tightbbox(renderer), image):
            problems.append(
                f"the panel {ax.get_title()[:40]!r} (its labels or ticks) runs past the image's edge"
            )
    return problems


# The SVG's text stays text (searchable, a fraction of the size of glyph outlines), its element ids
# are hashed from a fixed salt and it carries no date, so the same figure writes the same bytes.
SVG_RC = {"svg.fonttype": "none", "svg.hashsalt": "rlvr-repro"}


def save(fig, path: str | Path) -> Path:
    """Write a figure as PNG and, beside it, as SVG (`rlvr.io.files.svg_beside`), each atomically (temp
    file, then rename); returns the PNG's path. A legend, title or label that leaves the image, or a
    legend on a panel (`layout_problems`), is an error in the figure's code, not something to ship."""
    import matplotlib

    png = atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    problems = layout_problems(fig)
    if problems:
        raise ValueError(f"{Path(path).name}: " + "; ".join(problems))
    with matplotlib.rc_context(SVG_RC):
        atomic_write(svg_beside(png), lambda tmp: fig.savefig(tmp, format="svg", metadata={"Date": None}))
    return png


def read_tsv(path: str | Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


# Each figure's chapter and one-sentence caption, shown under it in the report.
CAPTIONS: dict[str, tuple[str, str]] = {
    "worked-a2-group-advantages.png": (
        "A",
        "Group-relative advantages for groups of 8 with different numbers "
        "correct: a rare success gets a large positive advantage, and a group "
        "where all agree gets none (no gradient).",
    ),
    "worked-a7-kl-estimators.png": (
        "A",
        "The three KL estimators against the exact KL as the reference moves away "
        "by delta: k2's bias shrinks as delta cubed (left); their variances (right).",
    ),
    "worked-a8-memory.png": (
        "A",
        "Memory for weights and optimiser state against model size: GRPO drops PPO's critic "
        "and reward model, and beta = 0 drops the reference as well.",
    ),
    "hack-reward-vs-accuracy.png": (
        "A",
        "GRPO on the hackable substring verifier, mean over chains with its 95% band and each chain "
        "as a thin line: the reward climbs away from exact accuracy while the policy emits more "
        "digits per response.",
    ),
    "worked-b5-signal-probability.png": (
        "B",
        "Chance that a group of G samples has mixed rewards, so a non-zero "
        "gradient, when each sample is correct with probability p.",
    ),
    "worked-b10-passk-toy.png": (
        "B",
        "The chapter's two-problem toy: RL raises pass@1, and the base model catches up "
        "at large k (the crossover).",
    ),
    "worked-b14-demo.png": (
        "B",
        "A simulated GRPO run on prompts of graded difficulty: mean accuracy and the shares "
        "of groups with no signal (left), each prompt's success rate over iterations (right).",
    ),
    "passk-curves.png": (
        "B",
        "pass@k on the 300 held-out problems: the SFT start and GRPO (top), then a panel per variant: "
        "its pass@k minus its own chain's SFT's with its 95% band over chains, grpo's in grey beside "
        "it; a dot marks a chain's crossover, the first k where GRPO falls strictly below its SFT start.",
    ),
    "passk-scatter.png": (
        "B",
        "Correct samples of 64 per held-out problem, SFT (mean over chains) against GRPO (seed "
        "mean): points on the x axis are problems SFT sometimes solves and GRPO never does.",
    ),
    "passk-solve-rates.png": (
        "B",
        "Per-problem solve rates as cumulative shares: the height at 0 is the share of "
        "problems never solved in 64 samples, the mass near 0 what sampling can miss.",
    ),
    "starts-passk.png": (
        "B",
        "Chapter B's candidate starts (`rlvr starts`), chain means: the share of the validation "
        "problems still unsolved after k samples, each SFT start dashed and GRPO from it solid; "
        "where a solid line ends above its dashed one, RL narrowed coverage.",
    ),
    "grpo-curves-chapter-a.png": (
        "A",
        "Chapter A's GRPO runs, chain mean with its 95% band and each chain as a thin line: "
        "training reward, sampled accuracy, KL to the reference and policy entropy per step.",
    ),
    "grpo-paired-chapter-b.png": (
        "B",
        "Each variant minus grpo on the same chain (same SFT start, same data order), on the chains "
        "both ran: a grey dot per chain, the mean over chains with its 95% t-interval in black. "
        "pass@1 and pass@64 from the passk stage, KL and entropy at the last step; an interval "
        "clear of 0 is a difference the chains agree on.",
    ),
    "grpo-curves-chapter-b.png": (
        "B",
        "Chapter B's GRPO variants at equal recipe and steps, a row each against grpo (grey in every "
        "row): chain mean with its 95% band and each chain as a thin line, for training reward, "
        "held-out accuracy, KL to the reference and policy entropy per step (a column each, one y axis).",
    ),
    "grpo-end-curves-chapter-b.png": (
        "B",
        "Chapter B's headline GRPO runs to their controlled end (validation pass@1 {target}, the target "
        "params.yaml declares): chain mean over the chains still training at each step, with its 95% "
        "band and each chain as a thin line.",
    ),
    "end-survival.png": (
        "B",
        "How many steps chapter B's headline runs take to their controlled end (validation pass@1 at "
        "the target): the share of runs there by each step, a Kaplan-Meier estimate over every run "
        "with its 95% band (log-log); a run the step cap stopped first is censored (a cross at the "
        "cap), never left out. The dashed line is the median steps, the shaded strip its 95% "
        "interval.",
    ),
    "grpo-end-paths.png": (
        "B",
        "Each chain's path from its SFT start to its controlled end in the (pass@1, pass@64) plane of "
        "the 300 held-out problems, exact from the answer probabilities at every check, the "
        "chapter's SFT and GRPO points as stars: where RL narrows, a path ends lower than it began.",
    ),
}
SCALING_CAPTION = (
    "Seconds per GRPO step against group size, response length and model width, each moved alone "
    "from the base: predict a bigger run's cost from the slope (`rlvr bench --only scaling`)."
)


SCALING_AXES = {
    "group_size": "group size G",
    "response_tokens": "response tokens",
    "d_model": "model width d_model",
}


def bench_scaling(scaling: dict, path: Path) -> Path:
    """Seconds per GRPO step as one workload dimension moves (the others at the base), ours as a
    line, TRL's GRPOTrainer as points where it was measured; log-log with a shared y axis, so a
    slope reads as a power and the panels compare. Each point is labelled with its seconds.
    scaling: `rlvr bench --only scaling`'s record in reports/benchmarks.json."""
    fig = new_figure((12, 4.0))
    axes = fig.subplots(1, len(SCALING_AXES), sharey=True)
    values = [v for r in scaling["rows"] for v in (r["seconds"], r.get("trl_seconds")) if v]
    nice = [
        t
        for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20)
        if min(values) / 2 <= t <= max(values) * 2
    ]
    for ax, (axis, label) in zip(axes, SCALING_AXES.items()):
        rows = [r for r in scaling["rows"] if r["axis"] == axis]
        x = [r[axis] for r in rows]
        series = [
            ("rlvr (ours)", [(r[axis], r["seconds"]) for r in rows], "o-", "C0"),
            (
                "TRL GRPOTrainer",
                [(r[axis], r["trl_seconds"]) for r in rows if r.get("trl_seconds")],
                "s--",
                "C3",
            ),
        ]
        for name, points, style, color in series:
            if not points:
                continue
            ax.plot(*zip(*points), style, color=color, label=name)
            for px, py in points:
                ax.annotate(
                    f"{py:.3g} s",
                    (px, py),
                    textcoords="offset points",
                    xytext=(0, 7),
                    ha="center",
                    fontsize=7,
                    color=color,
                )
        ax.set(xscale="log", yscale="log", xlabel=label, title=f"{label} (others at base)")
        ax.set_xticks(x, [str(v) for v in x])
        ax.set_xticks([], minor=True)
        ax.set_yticks(nice, [f"{t:g}" for t in nice])
        ax.set_yticks([], minor=True)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("seconds per step")
    legend_below(fig)
    base = ", ".join(f"{k} {v}" for k, v in scaling["base"].items())
    fig.suptitle(
        f"Cost of one GRPO step ({scaling['prompts']} prompts, beta {scaling['beta']}; base: {base})"
    )
    return save(fig, path)


def calibration_paths(record: dict, path: Path) -> Path:
    """`rlvr calibrate`: validation pass@1 against rollouts (P x G x steps) of every calibration run,
    one panel per grid setting (lr, P), one line per calibration chain, the target dashed; the
    setting the declared rule chose is named in its panel's title."""
    settings, runs = record["settings"], record["runs"]
    target, chosen = record["declared"]["target"], record["chosen"]
    cols = len({s["prompts_per_step"] for s in settings})
    rows = -(-len(settings) // cols)
    fig = new_figure((3.2 * cols + 0.8, 2.4 * rows + 1.2))
    axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True, sharey=True)).ravel()
    chains = sorted({r["chain"] for r in runs})
    colours = dict(zip(chains, palette(len(chains))))
    G = record["declared"].get("group_size", 8)
    for i, (ax, s) in enumerate(zip(axes, settings)):
        for r in (r for r in runs if r["setting"] == i):
            x = [c["step"] * s["prompts_per_step"] * G for c in r["path"]]
            ax.plot(
                x,
                [c["value"] for c in r["path"]],
                color=colours[r["chain"]],
                lw=1.4,
                label=f"calibration chain {r['chain']}",
            )
        ax.axhline(target, color="k", ls="--", lw=1, label=f"target {target:g} (validation pass@1)")
        mark = (
            " (chosen)"
            if s["lr"] == chosen["lr"] and s["prompts_per_step"] == chosen["prompts_per_step"]
            else ""
        )
        ax.set_title(
            f"lr {s['lr']:g}, P {s['prompts_per_step']}: {s['good']}/{s['runs']} reach{mark}", fontsize=9
        )
        ax.grid(alpha=0.3)
    for ax in axes[len(settings) :]:
        ax.set_visible(False)
    for ax in axes[(rows - 1) * cols :]:
        ax.set_xlabel("rollouts (prompts x G x steps), thousands")
        ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:g}")
    for ax in axes[::cols]:
        ax.set_ylabel("validation pass@1 (exact)")
    figure_title(
        fig,
        "Chapter B's GRPO recipe, chosen on calibration chains: rollouts to validation pass@1 "
        f"{target:g} (the cheapest setting where every run gets there)",
    )
    legend_below(fig)
    return save(fig, path)


def endpoint_paths(
    paths: dict[int, list[dict]],
    book: dict,
    k: int,
    path: Path,
    label: str,
    below: tuple[int, int] | None = None,
    censored: frozenset[int] = frozenset(),
) -> Path:
    """Each chain's path from its start to its controlled end in the (pass@1, pass@k) plane of the
    test problems (exact, from the answer probabilities at every check), one small panel per chain,
    its start an open circle and its end a dot, the chapter's SFT (square) and GRPO (star) points in
    every panel. paths: chain -> its check rows (test_pass_at_1, test_pass_at_{k}); book:
    {"SFT": (pass@1, pass@k), "GRPO": (...)}; label: what the runs are (the variant and its rule).
    The title states how many chains end below their start at k: `below` (chains, of how many) as
    the claims count it (passk.json's 256-sample estimate), else the paths' own exact ends. A chain
    in `censored` (the step cap came first) ends in a red cross where it stopped."""
    chains = sorted(paths)
    cols = min(4, len(chains))
    rows = -(-len(chains) // cols)
    fig = new_figure((2.6 * cols + 1.0, 2.3 * rows + 1.4))
    axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True, sharey=True)).ravel()
    narrowed = 0
    for ax, chain in zip(axes, chains):
        x = [r["test_pass_at_1"] for r in paths[chain]]
        y = [r[f"test_pass_at_{k}"] for r in paths[chain]]
        narrowed += y[-1] < y[0]
        ax.plot(x, y, color="tab:blue", lw=0.8, alpha=0.8, label="the chain's checks, in order")
        ax.plot(x[:1], y[:1], "o", mfc="white", color="tab:blue", ms=6, label="its SFT start")
        if chain in censored:  # the cap stopped it short of the end: where it stopped, not an end
            ax.plot(
                x[-1:], y[-1:], "X", color="tab:red", ms=8, label="where the step cap stopped it (censored)"
            )
        else:
            ax.plot(x[-1:], y[-1:], "o", color="tab:blue", ms=6, label="its controlled end")
        for name, marker in (("SFT", "s"), ("GRPO", "*")):
            if name in book:
                bx, by = book[name]
                ax.plot(
                    [bx],
                    [by],
                    marker=marker,
                    color="k",
                    ms=9 if marker == "*" else 6,
                    ls="none",
                    label=f"the chapter's {name}: pass@1 {bx:g}, pass@{k} {by:g}",
                )
        ax.set_title(f"chain {chain}" + (" (censored at the cap)" if chain in censored else ""), fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes[len(chains) :]:
        ax.set_visible(False)
    for ax in axes[(rows - 1) * cols :]:
        ax.set_xlabel("pass@1, 300 test problems")
    for ax in axes[::cols]:
        ax.set_ylabel(f"pass@{k}")
    count, of, source = (*below, "256 samples a problem") if below else (narrowed, len(chains), "exact")
    figure_title(
        fig,
        f"GRPO to its controlled end ({label}): pass@{k} ends below its start in "
        f"{count} of {of} chains ({source})",
    )
    legend_below(fig)
    return save(fig, path)


def end_survival(km: dict, cap: float, path: Path, label: str) -> Path:
    """The share of runs at their controlled end by each step (1 - the Kaplan-Meier curve of
    `rlvr.stats.survival`), its band, censored runs as crosses at the cap, the median and its
    interval; label: what the runs are (the variant and its rule)."""
    fig = new_figure((7.5, 4.6))
    ax = fig.subplots()
    steps = [0.0, *km["steps"], cap]
    there = [0.0, *(1 - p for p in km["still_short"])]
    there.append(there[-1])
    lo = [0.0, *(1 - p for p in km["band"][1])]
    hi = [0.0, *(1 - p for p in km["band"][0])]
    lo.append(lo[-1])
    hi.append(hi[-1])
    ax.fill_between(steps, lo, hi, step="post", color="tab:blue", alpha=0.2, label="95% band (log-log)")
    ax.step(
        steps, there, where="post", color="tab:blue", lw=1.8, label="share of runs at the end (Kaplan-Meier)"
    )
    if km["censored"]:
        n = len(km["censored"])
        ax.plot(
            [cap] * n, [there[-1]] * n, "x", color="tab:red", ms=10, mew=2, label=f"censored at the cap ({n})"
        )
    median, (m_lo, m_hi) = km["median"], km["median_ci"]
    if median is not None:
        ax.axvline(median, color="k", ls="--", lw=1, label=f"median {median:g} steps")
        ax.axvspan(
            m_lo if m_lo is not None else 0,
            m_hi if m_hi is not None else cap,
            color="k",
            alpha=0.06,
            label="the median's 95% interval",
        )
    ax.set(xlim=(0, cap * 1.03), ylim=(0, 1.02), xlabel="GRPO steps", ylabel="share of runs at the end")
    ax.grid(alpha=0.3)
    span = "not reached" if median is None else f"{median:g} [{_or_open(m_lo)}, {_or_open(m_hi)}]"
    figure_title(fig, f"Steps to the controlled end ({label}): median {span}, {km['runs']} runs")
    legend_below(fig)
    return save(fig, path)


def _or_open(x: float | None) -> str:
    return "not reached" if x is None else f"{x:g}"


def paired_figure(panels: list[dict], base: str, title: str, path: Path) -> Path:
    """Each variant minus `base`, chain by chain: per panel (`rlvr.report.compare.paired_view`'s), a
    column per variant with one small dot per chain (chain s at the same offset in every column, so
    a chain can be followed across them) and the mean over chains with its 95% t-interval. Where
    the variants' bands overlap in the learning curves, the pairs, which share a start and a data
    order, can still tell them apart."""
    from matplotlib.lines import Line2D

    fig = new_figure((12, 7.2))
    axes = fig.subplots(2, (len(panels) + 1) // 2, squeeze=False).ravel()
    chains = sorted({c for p in panels for r in p["rows"] for c in r["chains"]})
    offset = {c: 0.5 * (i / max(1, len(chains) - 1) - 0.5) for i, c in enumerate(chains)}  # within +-0.25
    for ax, panel in zip(axes, panels):
        rows = panel["rows"]
        ax.axhline(0, color="black", lw=0.8)
        for x, r in enumerate(rows):
            ax.plot(
                [x + offset[c] for c in r["chains"]], r["diffs"], "o", ms=3.5, color="tab:gray", alpha=0.8
            )
            lo, hi = r["ci95"] or (r["mean"], r["mean"])
            ax.errorbar(
                [x],
                [r["mean"]],
                yerr=[[r["mean"] - lo], [hi - r["mean"]]],
                fmt="D",
                ms=5,
                color="black",
                capsize=4,
            )
        ax.set_xticks(range(len(rows)), [r["variant"] for r in rows], rotation=30, ha="right")
        ax.set(title=panel["title"], ylabel=f"{panel['unit']}: variant - {base}")
        ax.grid(alpha=0.3, axis="y")
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    legend_below(
        fig,
        [
            (
                Line2D([], [], ls="", marker="o", ms=3.5, color="tab:gray"),
                f"one chain: the variant minus {base} on it",
            ),
            (
                Line2D([], [], ls="-", marker="D", ms=5, color="black"),
                "mean over chains and its 95% t-interval",
            ),
        ],
    )
    fig.suptitle(title, fontsize=11)
    return save(fig, path)
