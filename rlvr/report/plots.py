"""The figures the pipeline draws, one function each, the canvas, legend and save helpers they
share, and every figure's caption. The worked examples' figures are rlvr.report.workedplots', the
figures over training steps rlvr.report.trainplots'.

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
from rlvr.report.compare import delta_bounds
from rlvr.stats import metric_bounds


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
        "pass@k on the 300 held-out problems: the SFT start and GRPO (left), and every variant's "
        "pass@k minus its own chain's SFT's with its 95% band over chains (right); a dot marks "
        "a chain's crossover, the first k where GRPO falls strictly below its SFT start.",
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
        "Chapter B's GRPO variants at equal recipe and steps (the variant matrix beside grpo), chain "
        "mean with its 95% band and each chain as a thin line: training reward, held-out accuracy, KL "
        "to the reference and policy entropy per step.",
    ),
    "grpo-end-curves-chapter-b.png": (
        "B",
        "Chapter B's headline GRPO runs to their controlled end (validation pass@1 0.83): chain mean "
        "over the chains still training at each step, with its 95% band and each chain as a thin line.",
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


PASS_BOUNDS = metric_bounds("pass_at_k")  # a pass@k band stops at 0 and 1, a difference of two at -1, 1


def _within(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


def _k_axis(ax, n: int) -> None:
    """A log2 axis for k with every power of two labelled: 1, 2, 4, ..., n."""
    ticks = [2**i for i in range(n.bit_length()) if 2**i <= n]
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlim(1, n)


def crossover_label(variant: str, per_chain: list | None, n: int) -> str:
    """A variant's legend entry: its per-chain crossovers (a k, or why none: `rlvr.passk`'s
    `first_crossing` and `crossing_label`), or "no crossover up to n" when no chain crosses."""
    ks = [c for c in per_chain or [] if str(c).isdigit()]
    if not ks:
        return f"{variant}: no crossover up to {n}"
    return f"{variant}: crosses in {len(ks)} of {len(per_chain)} chains (k = {', '.join(ks)})"


def passk_curves(
    curves: dict[str, list[dict]],
    n: int,
    contrast: str | None,
    path: Path,
    crossovers: dict[str, list],
    labels: dict[str, str],
) -> Path:
    """curves: `passk_summary.summarise_counts`'s; crossovers: variant -> its per-chain crossover k (the
    metrics' `per_seed.crossover_k`); labels: "sft" and the contrast -> what the legend calls them
    (`rlvr.report.labels.sft_label`). Left: 1 - pass@k (the share of problems still unsolved
    after k samples) on a log axis for the SFT start and a contrast if scored (chain mean, 95% band
    over chains) and GRPO (seed mean, band over seeds), so the large-k end, where SFT catches up,
    is as readable as k = 1.
    Right: every variant's pass@k minus its chain's SFT's, seed mean with its 95% band, on a
    symmetric-log axis (linear within +-0.01); a dot marks each chain's crossover on the zero line."""
    fig = new_figure((12, 5.6))
    left, right = fig.subplots(1, 2)
    variants = [m for m, rows in curves.items() if rows and "minus_sft" in rows[0]]
    colour = dict(zip(variants, palette(len(variants))))  # one colour per variant in both panels
    for name, style in (
        ("sft", {"color": "black", "lw": 2}),
        (contrast, {"color": "tab:gray", "lw": 1.5, "ls": "--"}),
        ("grpo", {"color": colour.get("grpo", "tab:blue"), "lw": 2}),
    ):
        rows = curves.get(name)
        if not rows:
            continue
        # the variants' entries come from the right panel, in the same colours
        label = f"{labels[name]}: chain mean" if name != "grpo" else None
        ks = [r["k"] for r in rows]
        lo, hi = ("ci95_lo", "ci95_hi") if "ci95_lo" in rows[0] else ("pass_at_k_lo", "pass_at_k_hi")
        floor = 0.5 / 300  # below one problem in the held-out set: drawn at the axis floor
        miss = lambda key: [max(1 - _within(r[key], PASS_BOUNDS), floor) for r in rows]  # noqa: E731
        left.plot(ks, miss("pass_at_k"), label=label, **style)
        left.fill_between(ks, miss(hi), miss(lo), color=style["color"], alpha=0.2, lw=0)
    left.set_yscale("log")
    left.set(
        xlabel="k (samples per problem)",
        ylabel="1 - pass@k (share of problems unsolved)",
        title="problems still unsolved after k samples: SFT and grpo",
    )
    right.axhline(0, color="black", lw=1)
    for v in variants:
        rows = curves[v]
        ks = [r["k"] for r in rows]
        per_chain = crossovers.get(v)
        right.plot(
            ks,
            [r["minus_sft"] for r in rows],
            lw=1.4,
            color=colour[v],
            label=crossover_label(v, per_chain, n),
        )
        right.fill_between(
            ks,
            [_within(r["minus_sft_lo"], delta_bounds(PASS_BOUNDS)) for r in rows],
            [_within(r["minus_sft_hi"], delta_bounds(PASS_BOUNDS)) for r in rows],
            color=colour[v],
            alpha=0.12,
            lw=0,
        )
        for k in sorted({int(k) for k in per_chain or [] if str(k).isdigit()}):
            right.plot([k], [0], "o", color=colour[v], ms=6, mec="black", mew=0.6)
    right.set_yscale("symlog", linthresh=0.01)
    right.set(
        xlabel="k (samples per problem)",
        ylabel="pass@k minus SFT's (symlog, linear within 0.01)",
        title="pass@k minus the chain's SFT (below 0: SFT solves more)",
    )
    for ax in (left, right):
        _k_axis(ax, n)
        ax.grid(alpha=0.3, which="both")
    fig.suptitle(
        "pass@k on the held-out problems, from each chain's SFT start to each GRPO variant: "
        "chain means, 95% bands over chains; a dot: a chain's crossover",
        fontsize=10,
    )
    legend_below(fig)
    return save(fig, path)


def starts_passk(curves: dict[str, dict], n: int, chosen: str, path: Path, labels: dict[str, str]) -> Path:
    """`rlvr starts`: 1 - pass@k (the share of validation problems still unsolved after k samples,
    log axis) of every candidate start, SFT dashed and GRPO from it solid, one colour per candidate,
    chain means. curves: candidate -> {"sft": (n,), "grpo": (n,)} pass@k at k = 1..n; labels:
    candidate -> what the legend calls its start (`rlvr.report.labels.sft_label`)."""
    fig = new_figure((7.5, 4.8))
    ax = fig.subplots()
    ks = np.arange(1, n + 1)
    floor = 0.5 / 300  # below one problem in the held-out set: drawn at the axis floor
    for i, (name, c) in enumerate(curves.items()):
        tag = " (the pipeline's start by the SFT-side rule)" if name == chosen else ""
        ax.plot(
            ks, np.maximum(1 - c["sft"], floor), color=f"C{i}", ls="--", lw=1.5, label=f"{labels[name]}{tag}"
        )
        ax.plot(ks, np.maximum(1 - c["grpo"], floor), color=f"C{i}", lw=2, label=f"{name}: GRPO from it")
    ax.set_yscale("log")
    ax.set(
        xlabel="k (samples per problem)",
        ylabel="1 - pass@k (share of problems unsolved)",
        title="Chapter B's candidate starts: where GRPO narrows and where it does not",
    )
    _k_axis(ax, n)
    ax.grid(alpha=0.3, which="both")
    legend_below(fig, fontsize=7)
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


def endpoint_paths(paths: dict[int, list[dict]], book: dict, k: int, path: Path, label: str) -> Path:
    """Each chain's path from its start to its controlled end in the (pass@1, pass@k) plane of the
    test problems (exact, from the answer probabilities at every check), one small panel per chain,
    its start an open circle and its end a dot, the chapter's SFT (square) and GRPO (star) points in
    every panel. paths: chain -> its check rows (test_pass_at_1, test_pass_at_{k}); book:
    {"SFT": (pass@1, pass@k), "GRPO": (...)}; label: what the runs are (the variant and its rule).
    The title states how many chains end below their start at k."""
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
        ax.set_title(f"chain {chain}", fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes[len(chains) :]:
        ax.set_visible(False)
    for ax in axes[(rows - 1) * cols :]:
        ax.set_xlabel("pass@1, 300 test problems")
    for ax in axes[::cols]:
        ax.set_ylabel(f"pass@{k}")
    figure_title(
        fig,
        f"GRPO to its controlled end ({label}): pass@{k} ends below its start in "
        f"{narrowed} of {len(chains)} chains",
    )
    legend_below(fig)
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
