"""What readers see: the report's document model, its summary and book column, the curve tables
(no empty cells, bands inside the range), the pass@k curves and the figure captions."""

import numpy as np
import pytest

from rlvr.passk import pass_at_k_curve
from rlvr.passk_summary import summarise_counts
from rlvr.pipeline.curves import curve_band, split_curve
from rlvr.report.claims import Claim
from rlvr.report.claimtext import book_text
from rlvr.report.document import (
    Bullets,
    Contents,
    Figure,
    Heading,
    Para,
    Table,
    html_page,
    inline_html,
    markdown,
)
from rlvr.report.verdict import Evidence, Judged, reason


def test_inline_html_escapes_everything_but_bold_code_and_anchor_links():
    assert inline_html("<b>x</b> & **y** `a<b` [go](#summary)") == (
        '&lt;b&gt;x&lt;/b&gt; &amp; <b>y</b> <code>a&lt;b</code> <a href="#summary">go</a>'
    )
    assert inline_html("[out](https://x.org)") == "[out](https://x.org)"  # only in-page links are links


def test_one_document_two_outputs_with_contents_captions_and_collapsed_details():
    blocks = [
        Heading("Report", 1),
        Contents(2),
        Heading("Summary", 2, "summary"),
        Para("**3** claims"),
        Table(["id", "verdict"], [["A1", "differs"]], "verdicts", ["differs"], ["rule: x <= 1"], "rule"),
        Heading("Figures", 2, "figures"),
        Figure("f.png", b"\x89PNG", "What it shows.", "stage `x`"),
        Bullets(["one", "two"]),
    ]
    md, page = markdown(blocks, "figs"), html_page(blocks, "t")
    assert "- [Summary](#summary)\n- [Figures](#figures)" in md
    assert "| id | verdict | rule |" in md and "| A1 | differs | rule: x <= 1 |" in md
    assert "![f.png](figs/f.png)\n\n*What it shows.*" in md
    assert '<nav class="toc" id="contents"><b>Contents</b><ul><li><a href="#summary">' in page
    assert (
        '<td class="verdict">differs</td><td><details><summary>rule</summary>rule: x &lt;= 1</details></td>'
        in page
    )
    assert '<figcaption>What it shows.<span class="prov">provenance: stage <code>x</code></span>' in page
    linked = html_page(
        [Figure("f.png", b"\x89PNG", "c", "stage `x`", record="f.provenance.json")], "t", "figs"
    )
    assert (
        '<span class="prov">provenance: stage <code>x</code> · '
        '<a href="figs/f.provenance.json">full record</a>' in linked
    )
    assert page.index('id="summary"') < page.index("<table")


@pytest.mark.parametrize(
    "claim, shown",
    [
        ({"kind": "exact", "book": 0.57, "tol": 0.05}, "0.57"),
        ({"kind": "range", "book": 0.5, "lo": 0.0, "hi": 0.5}, "0 – 0.5"),
        ({"kind": "greater", "book": 0.0, "other_value": 0.0}, "—"),  # "rises": a direction, not the number 0
        ({"kind": "greater", "book": 0.0, "other": ["f.json", "k"]}, "—"),
        ({"kind": "close", "book": 0.0, "other": ["f.json", "k"], "tol": 0.05}, "—"),
        ({"kind": "greater", "book": 0.8, "other_value": 0.8}, "> 0.8"),
        ({"kind": "less", "book": 0.5, "other_value": 0.5}, "< 0.5"),
    ],
)
def test_book_column_shows_a_dash_where_the_book_gives_only_a_direction(claim, shown):
    assert book_text(Claim(id="c", **claim)) == shown


def test_reason_says_where_the_decisive_interval_lies():
    claim = Claim(id="c", kind="exact", book=0.57, tol=0.05)
    above = Evidence(0.93, 0.92, 0.94, "6 seeds")
    assert reason(Judged(claim, "differs", above, tested=above)) == (
        "Our interval [0.92, 0.94] (6 seeds) lies wholly above 0.62"
    )
    straddle = Evidence(0.52, 0.50, 0.54, "4 seeds")
    assert reason(Judged(claim, "inconclusive", straddle, tested=straddle)).startswith(
        "Our interval [0.5, 0.54] (4 seeds) straddles the bound 0.52"
    )
    undefined = Evidence(44.0, None, None, "4 seeds, 2 undefined", [40, None, 48, None])
    assert reason(Judged(claim, "differs", undefined, tested=undefined)).startswith(
        "2 chain(s) give no value"
    )


def test_a_curve_splits_into_tables_without_empty_cells():
    curve = [
        {"step": 0, "eval_acc": 0.5, "eval_kl_exact_nats": 0.0},
        {"step": 1, "reward_mean": 0.4},
        {"step": 2, "reward_mean": 0.6, "eval_acc": 0.7, "eval_kl_exact_nats": 0.1},
    ]
    train, evals = split_curve(curve)
    assert train == [{"step": 1, "reward_mean": 0.4}, {"step": 2, "reward_mean": 0.6}]
    assert evals == [
        {"step": 0, "eval_acc": 0.5, "eval_kl_exact_nats": 0.0},
        {"step": 2, "eval_acc": 0.7, "eval_kl_exact_nats": 0.1},
    ]


def test_seed_band_is_the_t_interval_cut_to_the_range():
    from scipy import stats

    seeds = [[{"step": 0, "acc": 0.02}], [{"step": 0, "acc": 0.0}], [{"step": 0, "acc": 0.04}]]
    (row,) = curve_band(seeds, "acc")
    half = stats.t.ppf(0.975, 2) * np.std([0.02, 0.0, 0.04], ddof=1) / np.sqrt(3)
    assert row["acc"] == pytest.approx(0.02) and row["acc_hi"] == pytest.approx(0.02 + half)
    assert row["acc_lo"] == 0.0 and 0.02 - half < 0  # cut at 0, not negative
    (single,) = curve_band([[{"step": 3, "acc": 0.5}]], "acc")
    assert single == {"step": 3, "acc": 0.5, "acc_lo": 0.5, "acc_hi": 0.5, "seeds": 1}


def test_the_band_averages_a_chains_nested_runs_first_and_follows_runs_that_stop_early():
    """Two GRPO seeds of chain 0 and one of chain 1: the band is over the two chains, not over three
    runs; a run with a controlled end that stopped at step 1 leaves step 2's row to the others."""
    runs = [
        [{"step": 0, "acc": 0.2}, {"step": 1, "acc": 0.4}, {"step": 2, "acc": 0.6}],
        [{"step": 0, "acc": 0.4}, {"step": 1, "acc": 0.6}, {"step": 2, "acc": 0.8}],
        [{"step": 0, "acc": 0.5}, {"step": 1, "acc": 0.9}],
    ]
    rows = curve_band(runs, "acc", chains=[0, 0, 1])
    assert [r["seeds"] for r in rows] == [2, 2, 1]
    assert rows[0]["acc"] == pytest.approx((0.3 + 0.5) / 2)  # chain 0's mean 0.3, chain 1's 0.5
    assert rows[2]["acc"] == pytest.approx(0.7) and rows[2]["acc_lo"] == rows[2]["acc_hi"] == rows[2]["acc"]


LABELS = {"sft": "SFT s (a start)", "base2": "SFT base2 (another start)"}


def _chain_counts(n=8, P=30, seeds=(0, 1, 2)):
    rng = np.random.default_rng(0)
    return {f"{m}/seed{s}": rng.integers(0, n + 1, P).tolist() for m in ("sft", "base2", "v") for s in seeds}


def test_passk_curves_cover_every_k_with_the_difference_from_each_chains_sft():
    n, seeds = 8, (0, 1, 2)
    counts = _chain_counts(n, seeds=seeds)
    chains = {"sft": list(seeds), "base2": list(seeds), "v": list(seeds)}
    _, curves = summarise_counts(counts, chains, n, [1, 8], 50, 0, contrast="base2")
    assert set(curves) == {"sft", "base2", "v"}
    assert [r["k"] for r in curves["v"]] == list(range(1, n + 1))
    curve = lambda key: pass_at_k_curve(counts[key], n, np.arange(1, n + 1))[1]  # noqa: E731
    for i, row in enumerate(curves["v"]):
        assert row["pass_at_k"] == pytest.approx(np.mean([curve(f"v/seed{s}")[i] for s in seeds]))
        assert row["minus_sft"] == pytest.approx(
            np.mean([curve(f"v/seed{s}")[i] - curve(f"sft/seed{s}")[i] for s in seeds])
        )
        assert row["minus_sft_lo"] <= row["minus_sft"] <= row["minus_sft_hi"]
    for i, row in enumerate(curves["sft"]):
        assert row["pass_at_k"] == pytest.approx(np.mean([curve(f"sft/seed{s}")[i] for s in seeds]))
        assert row["ci95_lo"] <= row["pass_at_k"] <= row["ci95_hi"]


def test_passk_figures_draw_from_chain_counts(tmp_path):
    from rlvr.report import passkplots

    n, seeds = 8, [0, 1, 2]
    counts = _chain_counts(n, seeds=seeds)
    counts.update({f"grpo/seed{s}": counts[f"v/seed{s}"] for s in (0, 1)})
    chains = {"sft": seeds, "base2": seeds, "v": seeds, "grpo": [0, 1]}
    metrics, curves = summarise_counts(counts, chains, n, [1, 8], 20, 0, contrast="base2")
    crossovers = {v: m["crossover_per_chain"] for v, m in metrics["variants"].items()}
    samples = {name: n for name in chains}
    for path in (
        passkplots.passk_curves(curves, n, "base2", tmp_path / "c.png", crossovers, LABELS, problems=30),
        passkplots.passk_scatter(counts, chains, samples, n, tmp_path / "s.png", LABELS),
        passkplots.passk_solve_rates(counts, chains, samples, "base2", tmp_path / "r.png", LABELS, n),
    ):
        assert path.read_bytes().startswith(b"\x89PNG")


def test_passk_figures_without_a_contrast_show_the_starts_chains(tmp_path):
    """params.yaml scores no contrast (passk.contrast: null): the figures draw the SFT start's own
    chains instead, and nothing asks for a second start."""
    from matplotlib.image import imread

    from rlvr.report import passkplots

    n, seeds = 8, [0, 1, 2]
    counts = {k: v for k, v in _chain_counts(n, seeds=seeds).items() if not k.startswith("base2/")}
    chains = {"sft": seeds, "v": seeds}
    metrics, curves = summarise_counts(counts, chains, n, [1, 8], 20, 0, contrast=None)
    assert "contrast" not in metrics and set(curves) == {"sft", "v"}
    samples = {name: n for name in chains}
    crossovers = {v: m["crossover_per_chain"] for v, m in metrics["variants"].items()}
    with_chains = passkplots.passk_solve_rates(counts, chains, samples, None, tmp_path / "r.png", LABELS, n)
    passkplots.passk_curves(curves, n, None, tmp_path / "c.png", crossovers, LABELS, problems=30)
    one = {"sft": [0], "v": seeds}
    one_chain = passkplots.passk_solve_rates(counts, one, samples, None, tmp_path / "1.png", LABELS, n)
    assert imread(with_chains).shape == imread(one_chain).shape
    assert (imread(with_chains) != imread(one_chain)).any()  # the per-chain lines are drawn


def test_problem_tables_count_a_problem_as_sft_solved_if_any_chain_solves_it():
    from rlvr.report.tables import problem_tables

    counts = {
        "sft/seed0": [0, 3, 0, 0],
        "sft/seed1": [2, 0, 0, 0],  # problems 0 and 1: one chain each
        "v/seed0": [0, 0, 0, 1],
        "v/seed1": [0, 0, 0, 0],
    }
    problems = {"n": 4, "problems": ["p0", "p1", "p2", "p3"], "counts": counts}
    summary, lists = problem_tables(problems, {"variants": {"v": {"never_solved_rl": 3.5}}})
    assert summary == [["v", 2, 3.5, 2, 1]]
    assert lists["v"] == [
        ["SFT only", "p0", "0 2 (of 4)", "0 0 (of 4)"],
        ["SFT only", "p1", "3 0 (of 4)", "0 0 (of 4)"],
        ["v only", "p3", "0 0 (of 4)", "1 0 (of 4)"],
    ]


def test_every_figure_the_pipeline_writes_has_a_caption():
    from rlvr.pipeline import paths
    from rlvr.pipeline.stages.report import caption
    from rlvr.report import plots

    written = [
        *paths.WORKED_FIGURES,
        paths.hack("x").figure.name,
        "grpo-curves-chapter-a.png",
        "grpo-curves-chapter-b.png",
        "grpo-paired-chapter-b.png",
        "grpo-end-curves-chapter-b.png",
        "grpo-end-paths.png",
        "end-survival.png",
        "starts-passk.png",
        *(
            f.name
            for f in (lambda x: (x.figure_curves, x.figure_scatter, x.figure_solve_rates))(
                paths.passk("a", "b")
            )
        ),
    ]
    assert sorted(written) == sorted(plots.CAPTIONS)
    assert all(chapter in "AB" and len(text) > 40 for chapter, text in plots.CAPTIONS.values())
    from rlvr.fields import ConfigError

    with pytest.raises(ConfigError, match="no caption"):
        caption("new-figure.png")


def test_the_controlled_end_caption_names_the_target_its_runs_recorded():
    from rlvr.fields import ConfigError
    from rlvr.pipeline.stages.report import ended_caption

    name = "grpo-end-curves-chapter-b.png"
    text = ended_caption(name, [{"target": 0.7}, {"target": 0.7}])
    assert "validation pass@1 0.7," in text and "{" not in text
    assert "0.6 / 0.75" in ended_caption(name, [{"target": 0.75}, {"target": 0.6}])
    with pytest.raises(ConfigError, match="no run with a controlled end"):
        ended_caption(name, [])


def test_summary_fits_a_terminal_and_names_the_claims_that_differ(tmp_path):
    import json

    from rlvr.fields import ConfigError, UserError
    from rlvr.report.summary import summary

    with pytest.raises(ConfigError, match="report.json: not found"):
        summary(tmp_path)
    (tmp_path / "metrics").mkdir()
    (tmp_path / "report.json").write_text(
        json.dumps(
            {
                "counts": {"reproduced": 2, "differs": 1, "inconclusive": 0, "cited": 1, "missing": 0},
                "claims": {
                    "A": {"verdict": "reproduced"},
                    "B": {"verdict": "differs"},
                    "C": {"verdict": "reproduced"},
                },
            }
        )
    )
    for v in ("grpo", "a_very_long_variant_name"):
        (tmp_path / "metrics" / f"grpo-{v}.json").write_text(
            json.dumps(
                {
                    "variant": v,
                    "task": "two_digit",
                    "seeds": [0, 1],
                    "eval_acc_final": 0.84,
                    "ci95": {"eval_acc_final": [0.82, 0.86]},
                    "kl_exact_nats_final": 0.8,
                    "step_seconds_median": 0.1,
                }
            )
        )
    (tmp_path / "metrics" / "passk.json").write_text(
        json.dumps(
            {
                "variants": {"grpo": {"pass_at_1_rl": 0.846, "pass_at_n_rl": 0.986, "never_solved_rl": 4.25}},
                "sft": {"pass_at_1": 0.53, "pass_at_n": 0.983, "never_solved": 5.0},
            }
        )
    )
    text = summary(tmp_path)
    assert not any(line.startswith("sft:") for line in text.splitlines())  # no start named: no baseline
    for v in ("grpo", "a_very_long_variant_name"):
        path = tmp_path / "metrics" / f"grpo-{v}.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "sft": "two_digit"}))
    (tmp_path / "metrics" / "sft-two_digit.json").write_text(
        json.dumps(
            {
                "task": "two_digit",
                "seeds": [0, 1],
                "sampled_acc_heldout": 0.52,
                "ci95": {"sampled_acc_heldout": [0.5, 0.54]},
            }
        )
    )
    text = summary(tmp_path)
    start = next(line for line in text.splitlines() if line.startswith("sft:two_digit "))
    assert start.split()[:9] == [
        "sft:two_digit",
        "two_digit",
        "2",
        "0.520",
        "±",
        "0.020",
        "0.530",
        "0.983",
        "5.00",
    ]
    header = next(line for line in text.splitlines() if line.startswith("variant"))
    assert header.index("task") == start.index("two_digit", len("sft:two_digit"))  # the columns line up
    assert text.splitlines()[0].startswith("claims: 2 reproduced, 1 differ, 1 cited")
    assert "  differs: B" in text
    grpo = next(line for line in text.splitlines() if line.startswith("grpo "))
    assert grpo.split()[:9] == ["grpo", "two_digit", "2", "0.840", "±", "0.020", "0.846", "0.986", "4.25"]
    assert max(len(line) for line in text.splitlines()[1:] if not line.startswith("a_very")) <= 100
    (tmp_path / "report.json").write_text("{")
    with pytest.raises(UserError, match="not valid JSON"):
        summary(tmp_path)


def test_learning_curves_average_a_step_over_the_seeds_that_have_a_value(tmp_path):
    """Dynamic sampling can keep no group at a step (its reward is NaN there): the figure is still
    drawn, from the seeds that have a value."""
    from rlvr.report.trainplots import learning_curves

    rows = lambda vals: [{"step": i, "reward_mean": v} for i, v in enumerate(vals)]  # noqa: E731
    runs = {
        "v": {
            "train": [rows(["", 0.5, 0.6]), rows([0.4, 0.5, 0.7]), rows([float("nan"), 0.5, 0.7])],
            "eval": [],
        }
    }
    path = learning_curves(runs, "t", tmp_path / "c.png", {"v": "v (3 chains)"})
    assert path.stat().st_size > 1000


def test_rlvr_works_from_a_subfolder_of_the_repository(tmp_path, monkeypatch, capsys):
    """Like git and dvc, `rlvr` finds its repository (the folder holding dvc.yaml and params.yaml)
    from any folder below it."""
    import json

    from rlvr.cli import main

    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "params.yaml").write_text("seed: 0\n")
    (tmp_path / "reports" / "metrics").mkdir(parents=True)
    counts = {"reproduced": 1, "differs": 0, "inconclusive": 0, "cited": 0, "missing": 0}
    (tmp_path / "reports" / "report.json").write_text(json.dumps({"counts": counts, "claims": {}}))
    (tmp_path / "docs" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "docs" / "deep")
    assert main(["summary"]) == 0
    assert capsys.readouterr().out.startswith("claims: 1 reproduced")
    # a path named from the subfolder is read as the user meant it, not from the root
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    monkeypatch.chdir(tmp_path / "reports")
    assert main(["provenance", "nope/x.json"]) == 2
    assert "reports/nope/x.json" in capsys.readouterr().err


def test_rlvr_outside_any_checkout_says_where_to_run_it(tmp_path, monkeypatch, capsys):
    from rlvr.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["summary"]) == 2
    err = capsys.readouterr().err
    assert f"no rlvr-repro checkout at or above {tmp_path}: run rlvr inside the repository" in err


def test_summary_leads_with_measured_claims_and_fits_100_columns(tmp_path, monkeypatch, capsys):
    import json

    from rlvr.cli import main

    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "params.yaml").write_text("seed: 0\n")
    (tmp_path / "reports" / "metrics").mkdir(parents=True)
    zero = {"reproduced": 0, "differs": 0, "inconclusive": 0, "cited": 0, "missing": 0}
    by_class = {
        "measured": {**zero, "reproduced": 8, "differs": 1, "inconclusive": 7},
        "calibrated": {**zero, "reproduced": 3, "inconclusive": 3},
        "closed-form": {**zero, "reproduced": 47},
        "cited": {**zero, "cited": 5},
    }
    claims = {f"claim-with-a-long-name-{i}": {"verdict": "inconclusive"} for i in range(12)}
    report = {"counts": zero, "by_class": by_class, "claims": claims}
    (tmp_path / "reports" / "report.json").write_text(json.dumps(report))
    monkeypatch.chdir(tmp_path)
    assert main(["summary"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Measured claims: 8 reproduced, 1 differ, 7 inconclusive (of 16)")
    assert max(map(len, out.splitlines())) <= 100


def test_sections_fold_all_but_the_opened_and_the_contents_still_reach_into_them():
    from rlvr.report.document import Section, sections

    blocks = [
        Heading("Report", 1),
        Contents(3),
        Heading("Summary", 2, "summary"),
        Para("first"),
        Heading("Detail", 2, "detail"),
        Heading("Deeper", 3, "deeper"),
        Para("later"),
    ]
    folded = sections(blocks, ("summary",))
    assert [type(b).__name__ for b in folded] == ["Heading", "Contents", "Section", "Section"]
    assert folded[2].open and not folded[3].open and folded[3].blocks[0].anchor == "deeper"
    page, md = html_page(folded, "t"), markdown(folded, "figs")
    assert (
        '<details class="section" open><summary><h2 id="summary">Summary</h2></summary><p>first</p></details>'
        in page
    )
    assert '<details class="section"><summary><h2 id="detail">Detail</h2></summary><h3 id="deeper">' in page
    assert '<a href="#deeper">Deeper</a>' in page  # a link into a fold (the page's script opens it)
    assert "## Detail\n\n### Deeper\n\nlater" in md and isinstance(folded[3], Section)


def test_one_chains_spike_does_not_set_a_panels_scale():
    """A KL spike of one chain (6 nats against the others' 0.3) would flatten every other curve: the
    axis stops near the bulk of the values and the panel names the peak it cut; without a spike the
    axis is left alone."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlvr.report.trainplots import clip_spikes

    calm = [[0.1 + 0.01 * i for i in range(50)] for _ in range(4)]
    fig, ax = plt.subplots()
    for chain in calm:
        ax.plot(chain)
    before = ax.get_ylim()
    clip_spikes(ax, calm)
    assert ax.get_ylim() == before and not ax.texts
    spiky = [*calm, [0.3] * 49 + [6.0]]
    ax.plot(spiky[-1])
    clip_spikes(ax, spiky)
    assert ax.get_ylim()[1] < 1.0 and ax.texts[0].get_text() == "clipped: a peak of 6"
    plt.close(fig)
