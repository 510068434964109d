"""Figures a researcher reads at a glance: every model named by its run and how it was made, legends
inside the image and off the curves, bands inside the metric's range, each chain under the mean,
chapter B's variants against grpo chain by chain, and an SVG beside every PNG with its provenance."""

import pytest

from rlvr.report import plots
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

    monkeypatch.setattr(plots, "save", keep)
    return figures


def legend_texts(fig) -> list[str]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    return [t.get_text() for leg in legends for t in leg.get_texts()]


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
        "labels with slip noise Beta(1.4, 1.9), stopped at accuracy 0.5"
    )
    assert sft_mechanism({"kind": "uniform", "rate": 0.0}, None, 8) == "fit to true labels, 8 epochs"


def test_an_unknown_noise_kind_is_one_line_naming_the_valid_ones():
    with pytest.raises(ValueError, match=r"noise.kind = 'typo': not a label noise; valid: uniform, slips"):
        label_source({"kind": "typo"})


def test_the_pass_at_k_figures_name_the_start_as_the_stage_gives_it(drawn, tmp_path):
    from test_views import _chain_counts

    from rlvr.passk import summarise_counts

    n, seeds = 8, [0, 1, 2]
    counts = {k: v for k, v in _chain_counts(n, seeds=seeds).items() if not k.startswith("base2/")}
    chains = {"sft": seeds, "v": seeds}
    metrics, curves = summarise_counts(counts, chains, n, [1, 8], 20, 0)
    label = sft_label("two_digit", **UNDER_TRAINED)
    crossovers = {v: m["crossover_per_chain"] for v, m in metrics["variants"].items()}
    plots.passk_curves(curves, n, None, tmp_path / "c.png", crossovers, {"sft": label})
    plots.passk_solve_rates(counts, chains, {"sft": n, "v": n}, None, tmp_path / "r.png", {"sft": label}, n)
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
