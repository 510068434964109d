"""Claims registry, verdict logic, report rendering and provenance (`rlvr diff`:
tests/report/test_compare.py)."""

import pytest
import yaml
from conftest import ROOT, at_head
from headless import CHROMIUM, probe

from rlvr.fields import ConfigError
from rlvr.report.claims import Claim, load_claims
from rlvr.report.evidence import judge

CLAIMS = ROOT / "experiments/claims.yaml"


def verdict(claim: dict, metrics: dict):
    """The judged claim of a claims.yaml entry written as a dict (its prose left out)."""
    return judge(Claim(id="c", **claim), metrics)


@pytest.fixture
def metrics():
    return {
        "m.json": {"a": {"b": [0.5, 2.0]}, "x": 0.3, "nan": None, "acc": 0.5, "acc_ci": [0.45, 0.55]},
        "s.json": {
            "seeds": [0, 1, 2],
            "acc": 0.6,
            "start": 0.4,
            "k": 12,
            "per_seed": {
                "acc": [0.58, 0.6, 0.62],
                "start": [0.4, 0.41, 0.39],
                "k": [12, None, 10],
                "wide": [0.2, 0.9, 0.5],
            },
            "wide": 0.533,
        },
        "t.json": {"seeds": [0, 1, 2], "acc": 0.61, "per_seed": {"acc": [0.6, 0.61, 0.62]}},
    }


@pytest.mark.parametrize(
    "claim, expected",
    [
        ({"kind": "exact", "book": 0.5, "tol": 0.01, "metric": ["m.json", "a.b.0"]}, "reproduced"),
        ({"kind": "exact", "book": 0.6, "tol": 0.01, "metric": ["m.json", "a.b.0"]}, "differs"),
        ({"kind": "range", "lo": 1.0, "hi": 3.0, "metric": ["m.json", "a.b.1"]}, "reproduced"),
        ({"kind": "range", "lo": 2.5, "hi": 3.0, "metric": ["m.json", "a.b.1"]}, "differs"),
        ({"kind": "greater", "metric": ["m.json", "a.b.1"], "other": ["m.json", "x"]}, "reproduced"),
        ({"kind": "greater", "metric": ["m.json", "x"], "other_value": 0.3}, "differs"),
        ({"kind": "less", "metric": ["m.json", "x"], "other_value": 0.5, "margin": 0.1}, "reproduced"),
        ({"kind": "close", "metric": ["m.json", "x"], "other": ["m.json", "a.b.0"], "tol": 0.1}, "differs"),
        ({"kind": "exact", "book": 1, "tol": 1, "metric": ["m.json", "nope"]}, "missing"),
        ({"kind": "exact", "book": 1, "tol": 1, "metric": ["m.json", "nan"]}, "missing"),
        ({"kind": "exact", "book": 1, "tol": 1, "metric": ["absent.json", "x"]}, "missing"),
        ({"kind": "cited", "book": "15.6 -> 71.0"}, "cited"),
        # seed intervals: 0.6 +- 0.05 (t, 3 seeds) inside, outside and across the claim's bounds
        ({"kind": "exact", "book": 0.6, "tol": 0.06, "metric": ["s.json", "acc"]}, "reproduced"),
        ({"kind": "exact", "book": 0.75, "tol": 0.05, "metric": ["s.json", "acc"]}, "differs"),
        ({"kind": "greater", "metric": ["s.json", "acc"], "other_value": 0.59}, "inconclusive"),
        ({"kind": "greater", "metric": ["s.json", "acc"], "other_value": 0.5}, "reproduced"),
        ({"kind": "range", "lo": 0.0, "hi": 0.5, "metric": ["s.json", "wide"]}, "inconclusive"),
        # a sampling interval beside a single value
        ({"kind": "exact", "book": 0.52, "tol": 0.01, "metric": ["m.json", "acc"]}, "inconclusive"),
        # paired seeds: acc - start is 0.2 +- small in every seed
        (
            {"kind": "greater", "metric": ["s.json", "acc"], "other": ["s.json", "start"], "margin": 0.1},
            "reproduced",
        ),
        (
            {"kind": "close", "metric": ["s.json", "acc"], "other": ["t.json", "acc"], "tol": 0.05},
            "reproduced",
        ),
        # a chain without a value (no crossover) decides nothing either way
        ({"kind": "range", "lo": 8, "hi": 16, "metric": ["s.json", "k"]}, "inconclusive"),
        ({"kind": "range", "lo": 13, "hi": 16, "metric": ["s.json", "k"]}, "inconclusive"),
    ],
)
def test_verdicts_follow_the_rule_of_each_kind(metrics, claim, expected):
    assert verdict(claim, metrics).verdict == expected


def test_seed_values_that_straddle_a_bound_are_inconclusive():
    """Three seeds at 0.48, 0.51, 0.54: the mean is above 0.5 but the 95% interval is not, so neither
    'reproduced' nor 'differs' can be claimed on this evidence."""
    m = {"f.json": {"seeds": [0, 1, 2], "v": 0.51, "per_seed": {"v": [0.48, 0.51, 0.54]}}}
    res = verdict({"kind": "greater", "metric": ["f.json", "v"], "other_value": 0.5}, m)
    assert res.verdict == "inconclusive"
    assert res.evidence.lo < 0.5 < res.evidence.value < res.evidence.hi
    assert (
        verdict({"kind": "greater", "metric": ["f.json", "v"], "other_value": 0.3}, m).verdict == "reproduced"
    )
    assert verdict({"kind": "greater", "metric": ["f.json", "v"], "other_value": 0.7}, m).verdict == "differs"


def test_malformed_claims_are_rejected_with_the_field_named(tmp_path):
    bad = tmp_path / "claims.yaml"
    bad.write_text(
        yaml.safe_dump(
            [
                {
                    "id": "x",
                    "chapter": "A",
                    "quote": "q",
                    "book": 1,
                    "why": "w",
                    "kind": "exact",
                    "metric": ["m.json", "k"],
                }
            ]
        )
    )
    with pytest.raises(ConfigError, match=r"\.tol: missing"):
        load_claims(bad)
    bad.write_text(yaml.safe_dump([{"id": "x", "kind": "guess"}]))
    with pytest.raises(ConfigError, match="kind = 'guess': must be one of"):
        load_claims(bad)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (.ci/run installs it)")
def test_report_html_renders_in_headless_chromium(tmp_path):
    """At 1280 px the page loads with no console errors and no horizontal overflow, at most ten
    screens tall with its sections of detail folded; the table of contents is visible and the
    summary comes before the first table; every image decodes and every figure has a caption; one
    verdict row per claim.

    A copy of the page gets a probe script that writes what it finds into the DOM, which chromium
    dumps once loading (and virtual time) has settled."""
    script = """<script>window.addEventListener('load', () => {
      const folds = [...document.querySelectorAll('details.section')];
      const closed = {height: document.documentElement.scrollHeight,
                      folded: folds.filter(d => !d.open).length};
      document.querySelectorAll('details').forEach(d => d.open = true);  // then every fold opened
      const imgs = [...document.images];
      const decoded = imgs.filter(i => i.complete && i.naturalWidth > 0).length;  // folded ones too
      const top = el => el ? el.getBoundingClientRect().top : null;
      const toc = document.querySelector('nav.toc');
      const figs = [...document.querySelectorAll('figure')];
      const r = {...closed, images: imgs.length, decoded,
                 rows: document.querySelectorAll('table.verdicts tbody tr').length,
                 width: document.documentElement.scrollWidth, viewport: window.innerWidth,
                 toc: toc ? toc.querySelectorAll('a').length : 0, toc_height: toc ? toc.offsetHeight : 0,
                 summary_top: top(document.getElementById('summary')),
                 table_top: top(document.querySelector('table')),
                 figures: figs.length,
                 captioned: figs.filter(f => (f.querySelector('figcaption')?.innerText || '')
                                              .trim().length > 20).length};
      const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(r);
      document.body.appendChild(pre);
    });</script>"""
    page = tmp_path / "report.html"
    page.write_text(at_head("reports/report.html").read_text().replace("</body>", script + "</body>"))
    result, console = probe(page, tmp_path / "profile", "1280,900", 5000)
    assert result["rows"] == len(load_claims(CLAIMS))
    assert result["images"] >= 8 and result["decoded"] == result["images"]
    assert result["viewport"] == 1280 and result["width"] <= result["viewport"], result
    assert result["toc"] >= 8 and result["toc_height"] > 0
    assert result["summary_top"] < result["table_top"]
    assert result["figures"] == result["images"] and result["captioned"] == result["figures"]
    assert not console, console
    assert result["height"] <= 10 * 900, result  # ten screens at 1280 px, before any fold is opened
    assert result["folded"] >= 8  # every section of detail starts folded


def test_benchmark_table_states_each_target_and_whether_it_is_met():
    from rlvr.report.benchtables import bench_rows

    bench = {
        "sampling": {
            "completions_per_second": {"median": 25000.0},
            "target_completions_per_second": 20000,
            "peak_rss_mb": 700.0,
            "target_peak_rss_mb": 1536,
        },
        "sft": {"tokens_per_second": {"median": 9e4}},
    }
    rows = {r[0]: r[1:] for r in bench_rows(bench)}
    assert rows["sampling, 300 prompts x 64"] == ["25,000 completions/s", ">= 20,000 completions/s", "yes"]
    assert rows["peak RSS while sampling"] == ["700 MB", "<= 1,536 MB", "yes"]
    assert rows["SFT throughput"][1:] == ["–", "–"]
    assert not any("GRPO step" in k for k in rows)  # absent benchmarks are left out, not shown as zero


def test_benchmark_table_shows_the_floor_ratio_and_compiled_against_eager():
    from rlvr.report.benchtables import bench_rows

    share = lambda v: {"share_of_gemm_limit": v, "first_call_seconds": 27.0}  # noqa: E731
    bench = {
        "pipeline": {"floor_seconds": 340.0, "ratio": 1.08, "target_ratio": 1.2},
        "compiled": {
            "grpo_step": {
                "eager": share(0.24),
                "compiled, warm cache": share(0.2),
                "compiled, empty cache": share(0.19),
                "target_share_of_gemm_limit": 0.3,
            }
        },
    }
    rows = {r[0]: r[1:] for r in bench_rows(bench)}
    assert rows["fresh clone's `dvc repro --force` over the floor (`rlvr bench --only pipeline`)"] == [
        "1.08 x",
        "<= 1.2 x",
        "yes",
    ]
    share = "GRPO step, beta = 0, {} (`rlvr bench --only compiled`): share of the fp32 GEMM limit"
    assert rows[share.format("eager")] == ["0.24", ">= 0.3", "no"]
    assert rows[share.format("torch.compile, warm cache")] == ["0.2", ">= 0.3", "no"]
    assert (
        rows["GRPO step, beta = 0 with torch.compile: first call, compiling into an empty cache"][0] == "27 s"
    )


def test_the_floor_table_sums_by_kind_in_pipeline_order():
    from rlvr.report.benchtables import floor_rows

    kind = lambda n, w, f: {"stages": n, "wall_seconds": w, "floor_seconds": f}  # noqa: E731
    pipeline = {
        "by_kind": {"grpo": kind(14, 129.1, 116.3), "check": kind(1, 1.2, 0.2), "sft": kind(5, 125.5, 117.4)},
        "wall_seconds": 255.8,
        "floor_seconds": 233.9,
    }
    assert floor_rows(pipeline) == [
        ["check (the guard)", 1, "1.2", "0.2", "6.00"],
        ["SFT", 5, "125.5", "117.4", "1.07"],
        ["GRPO, every variant", 14, "129.1", "116.3", "1.11"],
        ["total", 20, "255.8", "233.9", "1.09"],
    ]


def _run(variant, acc, kl):
    per_seed = {
        "eval_acc_final": acc,
        "train_acc_final": acc,
        "reward_final": acc,
        "response_len_final": [4, 4],
        "kl_exact_nats_final": kl,
    }
    return {"variant": variant, "task": "two_digit", "seeds": [0, 1], "per_seed": per_seed}


def test_variants_whose_settings_prove_they_train_alike_say_why_whatever_their_numbers():
    """GRPO and GSPO at one update per batch (mu = 1) have one gradient (tests/maths/test_grpo_math.py),
    so the report says why they agree from their settings: on this machine, where their chains
    come out the same, and on another CPU, where rounding parts them."""
    from rlvr.report.tables import twin_notes

    base = {"ratio": "token", "inner_epochs": 1, "aggregation": "seq_mean", "beta": 0.04, "task": "two_digit"}
    configs = {"grpo": base, "gspo": {**base, "ratio": "sequence"}}
    same = {
        "grpo-grpo.json": _run("grpo", [0.8, 0.9], [0.7, 0.71]),
        "grpo-gspo.json": _run("gspo", [0.8, 0.9], [0.7000001, 0.71]),  # rounding apart, nothing sampled
    }
    [note] = twin_notes(same, configs)
    assert note.startswith(
        "`grpo` and `gspo` train every chain alike: they differ only in `ratio` (token vs sequence)"
    )
    assert "every importance ratio is exactly 1" in note and "a relative 1e-07" in note
    elsewhere = {**same, "grpo-gspo.json": _run("gspo", [0.79, 0.91], [0.69, 0.72])}  # another CPU
    [note] = twin_notes(elsewhere, configs)
    assert "every importance ratio is exactly 1" in note and "Here they end" not in note
    chains = {
        **configs,
        "grpo": {**base, "seeds": [0, 1, 2, 3], "grpo_seeds": 2},
        "gspo": {**configs["gspo"], "seeds": [0, 1]},
    }
    [note] = twin_notes(elsewhere, chains)  # the pipeline's: grpo on more chains, two GRPO seeds each
    assert "and in the chains they run (`seeds`, `grpo_seeds`)" in note


@pytest.mark.parametrize(
    "change",
    [
        {"inner_epochs": 4},  # the ratio acts from the second epoch on
        {"ratio": "cispo"},  # another objective
        {"aggregation": "token_mean"},  # a second difference besides the ratio
    ],
)
def test_no_reason_is_given_where_the_settings_do_not_prove_it(change):
    from rlvr.report.tables import twin_notes

    base = {"ratio": "token", "inner_epochs": 1, "aggregation": "seq_mean", "beta": 0.04, "task": "two_digit"}
    other = {**base, "ratio": "sequence", **change}
    metrics = {"grpo-grpo.json": _run("grpo", [0.8, 0.9], [0.7, 0.71])}
    metrics["grpo-gspo.json"] = _run("gspo", [0.79, 0.91], [0.7, 0.71])  # numbers apart
    assert twin_notes(metrics, {"grpo": base, "gspo": other}) == []


def test_variants_whose_numbers_come_out_identical_are_named_with_what_they_differ_in():
    from rlvr.report.tables import twin_notes

    base = {"ratio": "token", "inner_epochs": 1, "aggregation": "seq_mean", "beta": 0.04, "task": "two_digit"}
    metrics = {
        "grpo-grpo.json": _run("grpo", [0.8, 0.9], [0.7, 0.71]),
        "grpo-gspo.json": _run("gspo", [0.8, 0.9], [0.7000001, 0.71]),
        "grpo-no_kl.json": _run("no_kl", [0.8, 0.91], [0.7, 0.71]),  # one seed samples differently
    }
    configs = {
        "grpo": base,
        "gspo": {**base, "ratio": "sequence", "inner_epochs": 4},
        "no_kl": {**base, "beta": 0.0},
    }
    [note] = twin_notes(metrics, configs)  # identical numbers, but no reason the settings give
    assert note.startswith("`grpo` and `gspo` end with the same accuracy") and "exactly 1" not in note
    assert "`inner_epochs`: 1 vs 4" in note and "`ratio`: token vs sequence" in note


def test_a_tolerance_finer_than_the_chains_spread_is_decided_on_the_interval_and_never_by_the_book():
    """Four chains spread with SD 0.04 against a +-0.02 tolerance: the t-interval of the mean is wider
    than the band, so the claim is inconclusive, whether or not the book's value is one our chains
    could give (consistency, shown beside the verdict); a band that holds the whole interval is
    reproduced, one far from it differs. No field records a one-run error."""
    import statistics

    chains = [0.50, 0.55, 0.60, 0.53]
    m = {"c.json": {"seeds": [0, 1, 2, 3], "acc": statistics.fmean(chains), "per_seed": {"acc": chains}}}
    near = verdict({"kind": "exact", "book": 0.56, "tol": 0.02, "metric": ["c.json", "acc"]}, m)
    assert near.verdict == "inconclusive" and not hasattr(near, "book_error")
    assert near.tested == near.evidence  # decided on our own interval, not on ours - book
    assert near.consistency["verdict"] == "consistent"
    far = verdict({"kind": "exact", "book": 0.83, "tol": 0.02, "metric": ["c.json", "acc"]}, m)
    assert far.verdict == "differs" and far.consistency["verdict"] == "not consistent"
    spread = {"c.json": {"seeds": [0, 1, 2, 3], "acc": 0.47, "per_seed": {"acc": [0.07, 0.84, 0.83, 0.14]}}}
    vague = verdict(
        {"kind": "exact", "book": 0.53, "tol": 0.02, "metric": ["c.json", "acc"], "feasible": [0, 1]}, spread
    )
    assert vague.verdict == "inconclusive" and vague.consistency["interval"] == [0, 1]
    wide = verdict({"kind": "exact", "book": 0.56, "tol": 0.2, "metric": ["c.json", "acc"]}, m)
    assert wide.verdict == "reproduced"


@pytest.mark.parametrize(
    "value, ok", [("", False), ("abc", False), ("-1e-6", False), ("0.5", False), ("1e-6", True), ("0", True)]
)
def test_the_perturbation_knob_is_checked(monkeypatch, value, ok):
    from rlvr.determinism import perturbation
    from rlvr.fields import ConfigError

    monkeypatch.setenv("RLVR_PERTURB", value)
    if ok:
        assert perturbation() == float(value)
    else:
        with pytest.raises(ConfigError, match=r"RLVR_PERTURB = .*: must be a number in \[0, 0.01\)"):
            perturbation()


def test_a_perturbation_moves_the_weights_by_about_its_size():
    import torch
    from conftest import make

    from rlvr.chain import perturb_
    from rlvr.configs import ModelConfig
    from rlvr.model import TinyLM

    torch.manual_seed(0)
    a = TinyLM(make(ModelConfig, d_model=32, n_head=2), 20)
    b = TinyLM(make(ModelConfig, d_model=32, n_head=2), 20)
    b.load_state_dict(a.state_dict())
    perturb_(b, 1e-6, seed=3)
    rel = [
        ((pb - pa).abs() / pa.abs().clamp(min=1e-30)).max().item()
        for pa, pb in zip(a.parameters(), b.parameters())
        if pa.abs().sum() > 0
    ]
    assert max(rel) > 0 and max(rel) < 1e-5


def test_report_text_uses_only_the_emphasis_the_document_renders():
    """The report's document model renders **bold**, `code` and links, nothing else: a *word* in
    single asterisks would reach the HTML page as literal asterisks. No string the report modules
    write (docstrings aside) carries one."""
    import ast
    import re
    from pathlib import Path

    import rlvr.report

    single = re.compile(r"(?<![*\w])\*[A-Za-z][^*\n]*?\*(?![*\w])")
    found = []
    for path in sorted(Path(rlvr.report.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found += [f"{path.name}:{node.lineno}: {m}" for m in single.findall(node.value)]
    assert not found, found
