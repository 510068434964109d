"""Figures a researcher reads at a glance: every model named by its run and how it was made, legends
inside the image and off the curves, bands inside the metric's range, each chain under the mean,
chapter B's variants against grpo chain by chain, and an SVG beside every PNG with its provenance."""

import pytest

from rlvr.report import passkplots, plots, trainplots, workedplots
from rlvr.report.labels import label_source, sft_label, sft_mechanism

UNDER_TRAINED = {"noise": {"kind": "uniform", "rate": 0.0}, "target": 0.53, "epochs": 24}


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plotting functions draw, kept instead of written."""
    figures = []

    def keep(fig, path):
        fig.canvas.draw()
        figures.append(fig)
        return path

    for module in (plots, passkplots, trainplots, workedplots):
        monkeypatch.setattr(module, "save", keep)
    return figures


def legend_texts(fig) -> list[str]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    return [t.get_text().replace("\n", " ") for leg in legends for t in leg.get_texts()]


# --------------------------------------------------------------------------------------------
# Labels from the settings


def test_a_start_is_named_by_its_run_and_how_its_settings_made_it():
    assert sft_label("two_digit", **UNDER_TRAINED) == (
        "SFT two_digit (under-trained on true labels, stopped at accuracy 0.53)"
    )
    assert sft_mechanism({"kind": "uniform", "rate": 0.64}, None, 160) == (
        "fit to labels 64% uniformly replaced, 160 epochs"
    )
    assert sft_mechanism({"kind": "slips", "alpha": 1.4, "beta": 1.9}, 0.5, 12) == (
        "slip labels Beta(1.4, 1.9), stopped at accuracy 0.5"
    )
    assert sft_mechanism({"kind": "uniform", "rate": 0.0}, None, 8) == "fit to true labels, 8 epochs"


def test_an_unknown_noise_kind_is_one_line_naming_the_valid_ones():
    with pytest.raises(ValueError, match=r"noise.kind = 'typo': not a label noise; valid: uniform, slips"):
        label_source({"kind": "typo"})


def test_the_pass_at_k_figures_name_the_start_as_the_stage_gives_it(drawn, tmp_path):
    from test_views import _chain_counts

    from rlvr.passk_summary import summarise_counts

    n, seeds = 8, [0, 1, 2]
    counts = {k: v for k, v in _chain_counts(n, seeds=seeds).items() if not k.startswith("base2/")}
    chains = {"sft": seeds, "v": seeds}
    metrics, curves = summarise_counts(counts, chains, n, [1, 8], 20, 0)
    label = sft_label("two_digit", **UNDER_TRAINED)
    crossovers = {v: m["crossover_per_chain"] for v, m in metrics["variants"].items()}
    passkplots.passk_curves(curves, n, None, tmp_path / "c.png", crossovers, {"sft": label}, problems=30)
    passkplots.passk_solve_rates(
        counts, chains, {"sft": n, "v": n}, None, tmp_path / "r.png", {"sft": label}, n
    )
    for fig in drawn:
        texts = legend_texts(fig)
        assert any(t.startswith(label) for t in texts), texts
        assert not any("slip" in t for t in texts)


def test_learning_curves_name_a_shared_start_in_the_title_and_mixed_starts_per_variant():
    from rlvr.fields import ConfigError
    from rlvr.pipeline.stages.report import curve_labels

    noisy = {"noise": {"kind": "uniform", "rate": 0.64}, "target": None, "epochs": 160}
    settings = {"a": UNDER_TRAINED, "b": noisy}
    runs = {v: {"train": [[], []], "eval": []} for v in ("x", "y")}
    same = {"grpo-x.json": {"sft": "a"}, "grpo-y.json": {"sft": "a"}}
    title, labels = curve_labels(same, runs, settings)
    assert title == "from SFT a (under-trained on true labels, stopped at accuracy 0.53)"
    assert labels == {"x": "x (2 chains)", "y": "y (2 chains)"}
    mixed = {"grpo-x.json": {"sft": "a"}, "grpo-y.json": {"sft": "b"}}
    title, labels = curve_labels(mixed, runs, settings)
    assert "a: under-trained" in title and "b: fit to labels 64% uniformly replaced, 160 epochs" in title
    assert labels == {"x": "x from a (2 chains)", "y": "y from b (2 chains)"}
    with pytest.raises(ConfigError, match=r"no settings recorded for stage sft@a; run `dvc repro sft@a`"):
        curve_labels(same, runs, {})


# --------------------------------------------------------------------------------------------
# Legends inside the image and off the panels


def _two_panels():
    fig = plots.new_figure((6, 3))
    axes = fig.subplots(1, 2)
    for i, ax in enumerate(axes):
        ax.plot([0, 1], [0, 1], label=f"line {i}")
        ax.plot([0, 1], [1, 0], label="shared")
    return fig, axes


def test_a_legend_past_the_image_edge_or_on_a_panel_is_found_and_refused(tmp_path):
    fig, axes = _two_panels()
    fig.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))  # starts at the right edge
    with pytest.raises(ValueError, match=r"f\.png: the legend starting 'line 0' runs past the image's edge$"):
        plots.save(fig, tmp_path / "f.png")
    fig, axes = _two_panels()
    axes[0].legend(loc="upper left")
    fig.canvas.draw()
    assert plots.layout_problems(fig) == ["the legend starting 'line 0' lies on a panel"]


def test_a_label_or_title_past_the_image_edge_is_found():
    fig, axes = _two_panels()
    axes[1].set_xlabel("a label far too long for its panel " * 4)
    fig.suptitle("a title far too long for its figure " * 4)
    fig.canvas.draw()
    assert plots.layout_problems(fig) == [
        "the title 'a title far too long for its figure a ti' runs past the image's edge",
        "the panel '' (its labels or ticks) runs past the image's edge",
    ]


def test_legend_below_lists_each_label_once_in_a_strip_under_the_panels():
    fig, axes = _two_panels()
    legend = plots.legend_below(fig)
    fig.canvas.draw()
    assert [t.get_text() for t in legend.get_texts()] == ["line 0", "shared", "line 1"]
    assert plots.layout_problems(fig) == []
    assert legend.get_window_extent().y1 <= min(ax.get_window_extent().y0 for ax in axes)


def test_a_legend_of_long_names_wraps_into_fewer_columns_and_stays_inside_the_image():
    fig = plots.new_figure((5, 6))
    ax = fig.subplots()
    for i in range(4):
        ax.plot([0, 1], [i, i], label=f"variant {i} " + "with a very long description " * 6)
    legend = plots.legend_below(fig)
    fig.canvas.draw()
    assert legend._ncols < 4 and "\n" in legend.get_texts()[0].get_text()
    assert plots.layout_problems(fig) == []


def test_the_hack_figure_has_one_legend_under_its_panels_and_a_title_naming_the_start(drawn, tmp_path):
    curves = {}
    for seed in (0, 1, 2):
        path = tmp_path / f"seed{seed}.tsv"
        cols = ["step", *(key for _, key, _, _ in trainplots.HACK_LINES)]
        rows = [[str(step), *(f"{0.1 * step + 0.01 * seed:.3f}" for _ in cols[1:])] for step in (1, 2, 3)]
        path.write_text("\n".join("\t".join(r) for r in [cols, *rows]) + "\n")
        curves[seed] = path
    label = sft_label("single_digit", **UNDER_TRAINED)
    trainplots.hack_curves(curves, tmp_path / "h.png", label, "a_grpo")
    (fig,) = drawn
    assert label in fig.get_suptitle() and "3 chains" in fig.get_suptitle()
    assert len(fig.legends) == 1 and plots.layout_problems(fig) == []
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)


# --------------------------------------------------------------------------------------------
# Bands inside the metric's range


def _band_ys(ax) -> list[float]:
    """Every y of the shaded bands (fill_between) of a panel."""
    from matplotlib.collections import FillBetweenPolyCollection, PolyCollection

    polys = [c for c in ax.collections if isinstance(c, (PolyCollection, FillBetweenPolyCollection))]
    return [float(y) for c in polys for path in c.get_paths() for _, y in path.vertices]


def test_a_band_stops_at_the_range_the_metric_can_take():
    from rlvr.stats import mean_ci

    accuracy = [[0.99], [1.0], [0.7]]  # (S, T): three chains, one step
    assert mean_ci([0.99, 1.0, 0.7])[2] > 1  # the t-interval itself leaves [0, 1]
    mean, lo, hi = trainplots.chain_band(accuracy, (0.0, 1.0))
    assert hi == [1.0] and 0 < lo[0] < mean[0] < 1
    kl = [[0.0], [0.01], [0.3]]
    assert mean_ci([0.0, 0.01, 0.3])[1] < 0
    assert trainplots.chain_band(kl, (0.0, float("inf")))[1] == [0.0]
    one = trainplots.chain_band([[0.5, float("nan")]], (0.0, 1.0))
    assert one[0][0] == one[1][0] == one[2][0] == 0.5  # one chain: no interval


def test_the_learning_curves_bands_stay_inside_each_panels_metric_range(drawn, tmp_path):
    from rlvr.report.compare import metric_bounds

    def rows(values, key):
        return [{"step": str(i), key: str(v)} for i, v in enumerate(values)]

    extreme = ([0.98, 1.0, 1.0], [1.0, 0.6, 0.99], [0.99, 1.0, 0.5])  # near 1, spread: raw bands past 1
    low = ([0.0, 0.01, 0.0], [0.3, 0.0, 0.02], [0.0, 0.4, 0.0])  # near 0, spread: raw bands below 0
    train = [
        [
            {"step": str(i), "reward_mean": str(r), "kl_k3_nats": str(k), "entropy_nats": str(k)}
            for i, (r, k) in enumerate(zip(e, lo))
        ]
        for e, lo in zip(extreme, low)
    ]
    runs = {"v": {"train": train, "eval": [rows(e, "eval_acc") for e in extreme]}}
    trainplots.learning_curves(runs, "t", tmp_path / "c.png", {"v": "v (3 chains)"})
    (fig,) = drawn
    for ax, (_, key, _, _) in zip(fig.axes, trainplots.LEARNING_PANELS):
        lo, hi = metric_bounds(key)
        ys = _band_ys(ax)
        assert ys and lo <= min(ys) and max(ys) <= hi, key
    assert max(_band_ys(fig.axes[1])) == 1.0 and min(_band_ys(fig.axes[2])) == 0.0


def test_the_pass_at_k_bands_stop_at_0_and_1_and_their_differences_at_minus_1_and_1(drawn, tmp_path):
    ks = [1, 2, 4]
    start = [{"k": k, "pass_at_k": 0.9, "ci95_lo": -0.2, "ci95_hi": 1.3} for k in ks]
    variant = [
        {"k": k, "pass_at_k": 0.95, "ci95_lo": 0.5, "ci95_hi": 1.2, "minus_sft": 0.05}
        | {"minus_sft_lo": -1.4, "minus_sft_hi": 1.6}
        for k in ks
    ]
    passkplots.passk_curves(
        {"sft": start, "grpo": variant}, 4, None, tmp_path / "c.png", {}, {"sft": "SFT s (x)"}, problems=300
    )
    (fig,) = drawn
    left, right = fig.axes
    assert 0 < min(_band_ys(left)) and max(_band_ys(left)) == 1.0  # 1 - pass@k, floored for the log axis
    assert min(_band_ys(right)) == -1.0 and max(_band_ys(right)) == 1.0


# --------------------------------------------------------------------------------------------
# Each chain under the mean


def _thin(ax) -> list:
    return [ln for ln in ax.get_lines() if ln.get_linewidth() == trainplots.CHAIN_LINE["lw"]]


def test_the_learning_curves_draw_each_chain_thin_under_its_mean(drawn, tmp_path):
    evals = [[0.5, 0.6, 0.7], [0.5, 0.7, 0.9], [0.4, 0.5, 0.5]]  # (S, T)
    runs = {
        "v": {
            "train": [],
            "eval": [[{"step": str(i), "eval_acc": str(v)} for i, v in enumerate(e)] for e in evals],
        }
    }
    trainplots.learning_curves(runs, "t", tmp_path / "c.png", {"v": "v (3 chains)"})
    (fig,) = drawn
    accuracy = fig.axes[1]
    assert [list(ln.get_ydata()) for ln in _thin(accuracy)] == evals
    (mean,) = [ln for ln in accuracy.get_lines() if ln.get_label() == "v (3 chains)"]
    assert list(mean.get_ydata()) == pytest.approx([sum(c) / 3 for c in zip(*evals)])
    assert "one chain (thin lines)" in legend_texts(fig)


def test_the_hack_figure_draws_the_mean_its_band_and_each_chain(drawn, tmp_path):
    keys = [key for _, key, _, _ in trainplots.HACK_LINES]
    curves = {}
    for seed, scale in ((0, 0.1), (1, 0.2), (2, 0.3)):
        rows = [["step", *keys]] + [[str(t), *(f"{scale * t:.2f}" for _ in keys)] for t in (1, 2, 3)]
        curves[seed] = tmp_path / f"seed{seed}.tsv"
        curves[seed].write_text("\n".join("\t".join(r) for r in rows) + "\n")
    trainplots.hack_curves(curves, tmp_path / "h.png", "SFT s (x)", "a_grpo")
    (fig,) = drawn
    left, right = fig.axes[:2]
    assert len(_thin(left)) == 3 * 3 and len(_thin(right)) == 3 * 2  # a line per chain and curve
    (reward,) = [ln for ln in left.get_lines() if ln.get_label() == "substring reward"]
    assert list(reward.get_ydata()) == pytest.approx([0.2, 0.4, 0.6])  # the chain mean
    assert _band_ys(left) and _band_ys(right)  # a band for every curve
    assert max(_band_ys(left)) <= 1.0


# --------------------------------------------------------------------------------------------
# Chapter B's variants against grpo, chain by chain


def _metrics_file(task, seeds, **per_seed):
    return {"task": task, "sft": "two_digit", "seeds": seeds, "per_seed": per_seed}


def _chapter_b():
    """grpo on chains 0-3, v on 0, 1, 2 and 5 (listed out of order), a chapter A variant, and the
    passk stage's per-chain pass@1 and pass@n for grpo and v (its seeds in another order)."""
    return {
        "grpo-grpo.json": _metrics_file("two_digit", [0, 1, 2, 3], entropy_nats_final=[0.3, 0.2, 0.4, 0.1]),
        "grpo-v.json": _metrics_file("two_digit", [5, 2, 0, 1], entropy_nats_final=[9.0, 0.5, 0.1, 0.3]),
        "grpo-a.json": _metrics_file("single_digit", [0, 1, 2, 3], entropy_nats_final=[1.0] * 4),
        "passk.json": {
            "k_max": 64,
            "variants": {
                "grpo": {
                    "seeds": [0, 1, 2, 3],
                    "per_seed": {"pass_at_1_rl": [0.5, 0.6, 0.7, 0.8], "pass_at_n_rl": [0.9] * 4},
                },
                "v": {
                    "seeds": [1, 0, 5, 2],
                    "per_seed": {"pass_at_1_rl": [0.62, 0.55, 0.0, 0.66], "pass_at_n_rl": [0.95] * 4},
                },
            },
        },
    }


def test_the_paired_view_is_each_chains_difference_on_the_chains_both_ran(tmp_path):
    from rlvr.report.compare import delta, paired_view, variants_by_chain

    variants = variants_by_chain(_chapter_b(), tmp_path)
    assert variants["v"]["seeds"] == [0, 1, 2, 5]
    assert variants["v"]["per_seed"]["pass_at_1"] == [0.55, 0.62, 0.66, 0.0]  # by seed, not position
    panels = paired_view(variants, "grpo")
    assert [(p["metric"], p["title"]) for p in panels] == [
        ("pass_at_1", "pass@1 (held-out accuracy)"),
        ("pass_at_n", "pass@64"),
        ("entropy_nats_final", "policy entropy at the end"),
    ]  # no KL in either file: no KL panel
    assert all([r["variant"] for r in p["rows"]] == ["v"] for p in panels)  # the chapter A one is not paired
    (row,) = panels[0]["rows"]
    assert row["chains"] == [0, 1, 2]
    assert row["diffs"] == pytest.approx([0.55 - 0.5, 0.62 - 0.6, 0.66 - 0.7])
    expected = delta([0.5, 0.6, 0.7], [0.55, 0.62, 0.66], True, (0.0, 1.0))
    assert row["mean"] == pytest.approx(expected["mean"]) and row["ci95"] == pytest.approx(expected["ci95"])
    (entropy,) = panels[2]["rows"]
    assert entropy["diffs"] == pytest.approx([0.1 - 0.3, 0.3 - 0.2, 0.5 - 0.4])


def test_without_pass_at_k_the_paired_view_falls_back_to_held_out_accuracy_and_needs_its_base(tmp_path):
    from rlvr.report.compare import paired_view, variants_by_chain

    metrics = {
        "grpo-grpo.json": _metrics_file("two_digit", [0, 1], eval_acc_final=[0.5, 0.6]),
        "grpo-v.json": _metrics_file("two_digit", [0, 1], eval_acc_final=[0.7, float("nan")]),
        "grpo-w.json": _metrics_file("two_digit", [0, 1], eval_acc_final=[0.4, 0.4]),
    }
    (panel,) = paired_view(variants_by_chain(metrics, tmp_path), "grpo")
    assert panel["metric"] == "eval_acc_final"
    assert [r["variant"] for r in panel["rows"]] == ["w"]  # v has a chain with no value
    assert paired_view(variants_by_chain(metrics, tmp_path), "absent") == []


def test_the_paired_figure_draws_every_chains_difference_and_the_mean_with_its_interval(drawn, tmp_path):
    from rlvr.report.compare import paired_view, variants_by_chain

    panels = paired_view(variants_by_chain(_chapter_b(), tmp_path), "grpo")
    plots.paired_figure(panels, "grpo", "t", tmp_path / "p.png")
    (fig,) = drawn
    for ax, panel in zip(fig.axes, panels):
        (row,) = panel["rows"]
        dots = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
        assert [list(ln.get_ydata()) for ln in dots] == [row["diffs"]]
        means = [ln for ln in ax.get_lines() if ln.get_marker() == "D"]
        assert [list(ln.get_ydata()) for ln in means] == [[row["mean"]]]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["v"]
        assert "variant - grpo" in ax.get_ylabel()
    assert plots.layout_problems(fig) == []


def test_the_report_shows_the_paired_view_in_the_variants_section():
    from rlvr.report.document import Figure, Heading
    from rlvr.report.sections import variant_blocks

    figure = {"name": "grpo-paired-chapter-b.png", "png": b"\x89PNG", "caption": "c", "provenance": "p"}
    blocks = variant_blocks({}, [{**figure, "kind": "paired", "chapter": "B"}], {})
    heading = next(i for i, b in enumerate(blocks) if isinstance(b, Heading) and b.anchor == "paired")
    assert isinstance(blocks[heading + 1], Figure) and blocks[heading + 1].name == figure["name"]
    assert "grpo-paired-chapter-b.png" in plots.CAPTIONS


# --------------------------------------------------------------------------------------------
# An SVG beside every PNG, with the same provenance


INFO = {
    "stage": "passk",
    "params": {"params.yaml": {"passk": {"n": 64}}},
    "deps": {"data/ckpt": "0123"},
    "mlflow_runs": {"stage": "run<1>&2"},  # characters XML must escape
    "git_commit": "abc123",
}


def _small_figure():
    fig = plots.new_figure((4, 3))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], label="a line")
    ax.set(title="t", xlabel="x", ylabel="y")
    plots.legend_below(fig)
    return fig


def test_save_writes_an_svg_beside_the_png_with_the_same_bytes_each_time(tmp_path):
    import xml.etree.ElementTree as ET

    from rlvr.io.files import svg_beside

    png = plots.save(_small_figure(), tmp_path / "f.png")
    first = svg_beside(png).read_bytes()
    assert png.read_bytes().startswith(b"\x89PNG") and svg_beside(png) == tmp_path / "f.svg"
    assert ET.fromstring(first).tag == "{http://www.w3.org/2000/svg}svg"
    assert b"a line" in first  # text stays text
    plots.save(_small_figure(), tmp_path / "f.png")
    assert svg_beside(png).read_bytes() == first  # no date, no random ids


def test_the_report_copies_png_and_svg_with_the_same_provenance(tmp_path):
    from rlvr.io.files import svg_beside
    from rlvr.pipeline.provenance import embedded_provenance, metadata_texts
    from rlvr.pipeline.stages.report import figure_with_metadata

    png = plots.save(_small_figure(), tmp_path / "drawn" / "f.png")
    copy = figure_with_metadata(png, tmp_path / "copies" / "f.png", INFO)
    texts = embedded_provenance(copy)
    assert texts == metadata_texts(INFO) == embedded_provenance(svg_beside(copy))
    assert texts["rlvr:mlflow_runs"] == '{"stage": "run<1>&2"}'
    figure_with_metadata(copy, copy, {**INFO, "git_commit": "def456"})  # redone in place: replaced, not added
    assert embedded_provenance(svg_beside(copy))["rlvr:git_commit"] == "def456"
    assert svg_beside(copy).read_text().count("<rlvr:provenance") == 1


def test_a_png_without_its_svg_is_one_line_naming_the_missing_file(tmp_path):
    from rlvr.fields import ConfigError
    from rlvr.pipeline.stages.report import figure_with_metadata

    png = plots.save(_small_figure(), tmp_path / "f.png")
    (tmp_path / "f.svg").unlink()
    with pytest.raises(ConfigError, match=r"f\.svg: no SVG beside f\.png; rerun the stage that draws it$"):
        figure_with_metadata(png, tmp_path / "copy.png", INFO)
    figure_with_metadata(png, tmp_path / "copy.png", INFO, svg=False)  # a figure made without one
    assert not (tmp_path / "copy.svg").exists()


def test_provenance_goes_into_an_svg_without_a_metadata_element_and_not_into_other_files():
    from rlvr.pipeline.provenance import ProvenanceError, svg_with_provenance

    svg = svg_with_provenance('<svg xmlns="http://www.w3.org/2000/svg"><g/></svg>', {"rlvr:stage": "x"})
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"><metadata><rlvr:provenance')
    with pytest.raises(ProvenanceError, match="not an SVG"):
        svg_with_provenance("<html></html>", {"rlvr:stage": "x"})


def test_the_report_shows_the_png_and_links_the_svg_beside_it():
    from rlvr.report.document import Figure, html_page, markdown

    blocks = [
        Figure("f.png", b"\x89PNG", "What it shows.", "stage `x`", "f", "f.svg"),
        Figure("g.png", b"\x89PNG", "c", "p"),
    ]
    md, page = markdown(blocks, "figs"), html_page(blocks, "t", "figs")
    assert "![f.png](figs/f.png)\n\n*What it shows.* ([SVG](figs/f.svg))" in md
    assert '<a class="svg" href="figs/f.svg">SVG</a>' in page and "data:image/png;base64," in page
    assert page.count("SVG</a>") == 1 and md.count("[SVG]") == 1  # g has no SVG: no link


def test_every_curve_of_a_crowded_figure_gets_a_colour_of_its_own():
    """Past matplotlib's ten-colour cycle (chapter B draws 13 variants) colours come from tab20, so
    no two legend entries share one; more curves than that is refused in one line."""
    from matplotlib.colors import to_hex

    from rlvr.report.plots import palette

    assert palette(3) == ["C0", "C1", "C2"]
    assert len({to_hex(c) for c in palette(13)}) == 13
    with pytest.raises(ValueError, match="at most 20"):
        palette(21)


def test_a_long_title_wraps_to_a_narrow_figure_instead_of_leaving_it(tmp_path):
    """A one-panel figure (one temperature, one candidate start) with the wide figure's title: the
    title wraps, and the figure saves with nothing past its edge."""
    from rlvr.report.plots import figure_title, layout_problems, new_figure, save

    fig = new_figure((5.2, 4.6))
    fig.subplots().plot([0, 1], [0, 1])
    long = "pass@64 of RL minus its start, mean and 95% interval over chains (below 0: RL narrows)"
    figure_title(fig, long)
    save(fig, tmp_path / "narrow.png")
    assert layout_problems(fig) == [] and "\n" in fig.get_suptitle()


# --------------------------------------------------------------------------------------------
# Small multiples where many variants would merge


def _runs(variants: list[str], shift: float = 0.0) -> dict:
    evals = {v: [[0.5 + 0.01 * i * (j + 1) + shift for i in range(4)] for j in range(3)] for v in variants}
    return {
        v: {
            "train": [
                [
                    {"step": str(i), "reward_mean": "0.5", "kl_k3_nats": "0.1", "entropy_nats": "0.3"}
                    for i in range(4)
                ]
                for _ in range(3)
            ],
            "eval": [[{"step": str(i), "eval_acc": str(x)} for i, x in enumerate(e)] for e in evals[v]],
        }
        for v in variants
    }


def test_many_variants_get_a_row_each_against_the_reference_and_few_share_panels(drawn, tmp_path):
    many = ["grpo", *(f"v{i}" for i in range(trainplots.GRID_FROM - 1))]
    labels = {v: f"{v} (3 chains)" for v in many}
    trainplots.learning_curves(_runs(many), "t", tmp_path / "c.png", labels, reference="grpo")
    few = many[: trainplots.GRID_FROM - 1]
    trainplots.learning_curves(_runs(few), "t", tmp_path / "d.png", labels, reference="grpo")
    grid, shared = drawn
    rows = len(many) - 1
    assert len(grid.axes) == rows * len(trainplots.LEARNING_PANELS) and len(shared.axes) == 4
    for r, variant in enumerate(many[1:]):
        first = grid.axes[r * len(trainplots.LEARNING_PANELS)]
        assert first.get_ylabel().replace("\n", " ") == f"{variant} (3 chains)"
        colours = {str(ln.get_color()) for ln in first.get_lines() if ln.get_linewidth() == 1.6}
        assert colours == {trainplots.REFERENCE["color"], "tab:blue"}  # the reference and the row's variant
    assert "grpo (3 chains)" in legend_texts(grid)


def test_a_solved_set_is_drawn_at_half_a_problem_of_the_set_the_curves_are_over(drawn, tmp_path):
    import numpy as np

    ks = [1, 2, 4]
    solved = [{"k": k, "pass_at_k": 1.0, "ci95_lo": 1.0, "ci95_hi": 1.0} for k in ks]
    passkplots.passk_curves({"sft": solved}, 4, None, tmp_path / "c.png", {}, {"sft": "S"}, problems=20)
    passkplots.starts_passk(
        {"c": {"sft": np.ones(4), "grpo": np.ones(4)}}, 4, "c", tmp_path / "s.png", {"c": "S"}, problems=8
    )
    curves_fig, starts_fig = drawn
    assert {y for line in curves_fig.axes[0].lines for y in line.get_ydata()} == {0.5 / 20}
    assert {y for line in starts_fig.axes[0].lines for y in line.get_ydata()} == {0.5 / 8}
    with pytest.raises(ValueError, match="over 0 problems"):
        passkplots.unsolved_floor(0)


def test_each_variants_pass_at_k_gets_a_panel_with_grpo_beside_it(drawn, tmp_path):
    ks = [1, 2, 4]
    start = [{"k": k, "pass_at_k": 0.9, "ci95_lo": 0.8, "ci95_hi": 0.95} for k in ks]

    def variant(d):
        return [
            {"k": k, "pass_at_k": 0.9 + d, "ci95_lo": 0.8, "ci95_hi": 0.99, "minus_sft": d}
            | {"minus_sft_lo": d - 0.01, "minus_sft_hi": d + 0.01}
            for k in ks
        ]

    curves = {"sft": start, "grpo": variant(0.02), "a": variant(0.01), "b": variant(-0.01)}
    crossovers = {"grpo": ["4"], "a": ["none"], "b": ["1"]}
    passkplots.passk_curves(
        curves, 4, None, tmp_path / "c.png", crossovers, {"sft": "SFT s (x)"}, problems=300
    )
    (fig,) = drawn
    top, *panels = fig.axes
    assert [ax.get_title().split("\n")[0] for ax in panels] == ["grpo", "a", "b"]
    assert panels[0].get_title().endswith("crosses in 1 of 1 chains:\nk = 4")
    many = ["17", "14", "none", "8", "34", "23", "21", "25", "11", "16", "RL ahead to k = 64"]
    assert passkplots.crossover_words(many, 64) == "crosses in 9 of 11 chains:\nk = 8 to 34, median 17"
    assert passkplots.crossover_words(["9", "3"], 64) == "crosses in 2 of 2 chains:\nk = 3, 9"
    grey = [[ln for ln in ax.get_lines() if ln.get_color() == "0.5"] for ax in panels]
    assert [len(g) for g in grey] == [0, 1, 1]  # grpo's curve beside every other variant's
    wide = {v: ["4", "64", *[str(8 + i) for i in range(20)], *["none"] * 10] for v in ("grpo", "a", "b")}
    passkplots.passk_curves(curves, 4, None, tmp_path / "w.png", wide, {"sft": "SFT s (x)"}, problems=300)
    # 32 chains crossing from k = 4 to 64: the title fits its panel (save() refuses one that runs past)
    assert list(grey[1][0].get_ydata()) == [0.02] * 3


def test_a_temperature_legend_entry_stays_short_however_many_chains_cross():
    from rlvr.report.narrowing import _crossing_note

    many = [str(k) for k in (2, 4, 8, 16, 32, 64) * 5] + ["none", "RL ahead to k = 64"]
    assert _crossing_note(many, 64) == "crosses in 30 of 32 chains at k = 2 to 64, median 12"
    assert _crossing_note(["8", "none"], 64) == "crosses in 1 of 2 chains at k = 8"
    assert _crossing_note(["none"], 64) == "no crossover up to 64"
