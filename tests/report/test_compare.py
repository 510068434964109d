"""`rlvr diff`: intervals and the test are made over seeds, stay within each metric's range, and the
JSON layout does not depend on the variants' names. Metrics files are synthetic, written in tmp_path."""

import json
import math
import os
import shutil

import numpy as np
import pytest
from conftest import ROOT, at_head
from scipy import stats

from rlvr.cli import main
from rlvr.fields import ConfigError, UserError
from rlvr.report.compare import diff_variants, format_diff
from rlvr.stats import seed_metrics

N = 64  # samples per problem in the synthetic pass@k counts
P = 300  # held-out problems


def write_variant(metrics, name, per_seed, task="two_digit", seeds=(0, 1, 2, 3)):
    """A metrics file laid out as the grpo stage writes it: means, ci95 and per_seed values."""
    rows = {s: {k: v[i] for k, v in per_seed.items()} for i, s in enumerate(seeds)}
    data = {"variant": name, "task": task, "sft": task, "seeds": list(seeds), **seed_metrics(rows)}
    metrics.mkdir(parents=True, exist_ok=True)
    (metrics / f"grpo-{name}.json").write_text(json.dumps(data))


def write_counts(path, counts):
    path.write_text(json.dumps({"n": N, "problems": [f"p{i}" for i in range(P)], "counts": counts}))


def seed_counts(rng, difficulty, shifts):
    """Per-seed correct counts, problem i solved about N * (difficulty[i] + shift) times, topped up at
    random problems so that each seed's pass@1 is exactly mean(difficulty) + shift (to 1 / (N P))."""
    out = []
    for shift in shifts:
        c = np.floor(N * (difficulty + shift)).astype(int)  # (P,)
        short = round(N * P * (difficulty.mean() + shift)) - c.sum()
        c[rng.choice(P, size=short, replace=False)] += 1
        out.append(c.tolist())
    return out  # S x (P,)


def passk_case(tmp_path, a_shifts, b_shifts, seed=0):
    """Variants `a` and `b` on the same 300 problems, 4 seeds each, seed-level shifts of pass@1."""
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(0.2, 0.7, P)  # (P,)
    counts = {}
    for name, shifts in (("a", a_shifts), ("b", b_shifts)):
        for s, c in enumerate(seed_counts(rng, difficulty, shifts)):
            counts[f"{name}/seed{s}"] = c
        write_variant(tmp_path / "metrics", name, {"eval_acc_final": list(0.5 + np.asarray(shifts))})
    write_counts(tmp_path / "counts.json", counts)
    return diff_variants(tmp_path / "metrics", tmp_path / "counts.json", "a", "b"), counts


def test_a_difference_inside_the_seed_spread_is_not_significant(tmp_path):
    """The issue's case: B - A = 0.019 on pass@1, seed differences spread by ~0.03, 300 problems. Pooling
    seeds per problem makes it look certain; over 4 seeds it is not."""
    a_shifts = np.array([0.0, 0.03, -0.03, 0.01])
    seed_diffs = np.array([0.05, -0.03, 0.045, 0.011])  # mean 0.019, sd 0.037
    d, counts = passk_case(tmp_path, a_shifts, a_shifts + seed_diffs)
    p1 = d["passk"][0]
    assert p1["k"] == 1 and p1["delta"]["paired"]
    assert p1["delta"]["mean"] == pytest.approx(0.019, abs=1e-4)
    assert d["test"]["metric"] == "pass_at_1" and d["test"]["seeds"] == 4
    assert "paired t-test" in d["test"]["name"]
    assert d["test"]["pvalue"] > 0.05
    lo, hi = p1["delta"]["ci95"]
    assert lo < 0 < hi
    # the pooled per-problem test the issue replaced calls the same data overwhelming
    pooled = lambda v: np.sum([counts[f"{v}/seed{s}"] for s in range(4)], axis=0)  # noqa: E731 (P,)
    assert stats.wilcoxon(pooled("b"), pooled("a")).pvalue < 1e-10


def test_a_consistent_difference_is_significant(tmp_path):
    a_shifts = np.array([0.0, 0.03, -0.03, 0.01])
    d, _ = passk_case(tmp_path, a_shifts, a_shifts + 0.1)
    assert d["passk"][0]["delta"]["mean"] == pytest.approx(0.1, abs=1e-4)
    assert d["test"]["pvalue"] < 0.05
    assert d["passk"][0]["delta"]["ci95"][0] > 0  # the interval agrees with the test
    assert [r["k"] for r in d["passk"]] == [1, 8, N]


def test_intervals_stay_within_each_metrics_range(tmp_path):
    """A KL near 0 with one large seed: the t-interval would go negative and is clipped at 0. An
    accuracy delta whose t-interval passes 1 is clipped at 1."""
    write_variant(
        tmp_path, "a", {"kl_k3_nats_max": [0.001, 0.002, 0.5, 0.001], "eval_acc_final": [0, 0, 0.9, 0]}
    )
    write_variant(
        tmp_path, "b", {"kl_k3_nats_max": [0.003, 0.001, 0.002, 0.9], "eval_acc_final": [1, 1, 0.1, 1]}
    )
    d = diff_variants(tmp_path, tmp_path / "none.json", "a", "b")
    rows = {r["metric"]: r for r in d["metrics"]}
    kl, acc = rows["kl_k3_nats_max"], rows["eval_acc_final"]
    assert kl["a"]["ci95"][0] == 0.0 and kl["b"]["ci95"][0] == 0.0
    assert (
        kl["a"]["mean"] - stats.t.ppf(0.975, 3) * np.std(kl["a"]["seeds"], ddof=1) / 2 < 0
    )  # it was negative
    assert acc["delta"]["ci95"][1] == 1.0 and acc["delta"]["ci95"][0] >= -1.0
    assert acc["a"]["ci95"][0] == 0.0 and acc["b"]["ci95"][1] == 1.0


def key_paths(x, prefix=""):
    """Every key path in a JSON value (list items collapsed), to compare layouts."""
    if isinstance(x, dict):
        return {p for k, v in x.items() for p in {f"{prefix}/{k}"} | key_paths(v, f"{prefix}/{k}")}
    if isinstance(x, list):
        return {p for v in x for p in key_paths(v, prefix + "[]")}
    return set()


def test_json_keys_do_not_depend_on_variant_names(tmp_path):
    per_seed = {"eval_acc_final": [0.5, 0.6, 0.55, 0.52], "entropy_nats_final": [0.1, 0.2, 0.15, 0.1]}
    counts = {}
    for name in ("grpo", "dr_grpo", "x", "y"):
        write_variant(tmp_path / "m", name, per_seed)
        counts.update({f"{name}/seed{s}": [s + 1] * P for s in range(4)})
    write_counts(tmp_path / "c.json", counts)
    d1 = diff_variants(tmp_path / "m", tmp_path / "c.json", "grpo", "dr_grpo")
    d2 = diff_variants(tmp_path / "m", tmp_path / "c.json", "x", "y")
    assert key_paths(d1) == key_paths(d2)
    assert not any(name in p.split("/") for p in key_paths(d1) for name in ("grpo", "dr_grpo"))
    assert {"a", "b", "task", "warnings", "metrics", "passk", "test"} <= set(d1)
    assert set(d1["metrics"][0]["delta"]) >= {"mean", "ci95", "paired"}
    assert set(d1["test"]) >= {"name", "metric", "pvalue", "seeds"}
    json.dumps(d1, allow_nan=False)  # plain JSON: no numpy types, no NaN


def test_different_tasks_and_seeds_are_warned_about_and_unpaired(tmp_path):
    write_variant(
        tmp_path,
        "a_grpo",
        {"eval_acc_final": [0.9, 0.92, 0.91, 0.93, 0.9, 0.94]},
        task="single_digit",
        seeds=range(6),
    )
    write_variant(tmp_path, "grpo", {"eval_acc_final": [0.84, 0.85, 0.83, 0.86]})
    d = diff_variants(tmp_path, tmp_path / "none.json", "a_grpo", "grpo")
    assert d["task"] == {"a": "single_digit", "b": "two_digit"}
    assert any(w.startswith("tasks differ") for w in d["warnings"])
    assert any(w.startswith("seeds differ") for w in d["warnings"])
    assert d["metrics"][0]["delta"]["paired"] is False
    assert (
        d["passk"] == [] and d["test"]["metric"] == "eval_acc_final" and d["test"]["name"].startswith("Welch")
    )
    assert format_diff(d).splitlines()[0].startswith("warning: tasks differ")


def test_variants_on_fewer_chains_are_paired_on_the_chains_both_ran(tmp_path):
    """A variant trained on chains 0-3 against one on 0-7 from the same start: the deltas are the
    per-chain differences on 0-3 (exactly, not Welch over 8 + 4), and the warning names the rest."""
    a = [0.60, 0.70, 0.65, 0.55, 0.9, 0.1, 0.8, 0.2]
    write_variant(tmp_path, "grpo", {"eval_acc_final": a}, seeds=range(8))
    write_variant(tmp_path, "dr_grpo", {"eval_acc_final": [0.62, 0.71, 0.68, 0.56]})
    d = diff_variants(tmp_path, tmp_path / "none.json", "grpo", "dr_grpo")
    row = d["metrics"][0]
    assert row["delta"]["paired"] is True and d["seed_ids"] == {"a": [0, 1, 2, 3], "b": [0, 1, 2, 3]}
    assert row["delta"]["mean"] == pytest.approx(np.mean([0.02, 0.01, 0.03, 0.01]))
    assert row["a"]["seeds"] == a[:4] and d["test"]["name"].startswith("paired")
    assert any("paired on the 4 chains both ran (0, 1, 2, 3)" in w for w in d["warnings"])
    assert "deltas paired by seed" in format_diff(d)


def test_unknown_variant_and_bad_json_are_one_line_errors(tmp_path, monkeypatch, capsys):
    metrics = tmp_path / "reports" / "metrics"
    write_variant(metrics, "grpo", {"eval_acc_final": [0.5, 0.6, 0.55, 0.52]})
    with pytest.raises(
        ConfigError, match=r"variant 'nope': no .*grpo-nope\.json; variants with results: grpo$"
    ):
        diff_variants(metrics, tmp_path / "none.json", "grpo", "nope")
    (metrics / "grpo-cut.json").write_text('{"task": "two_digit", "seeds": [0, 1')
    with pytest.raises(UserError, match=r"grpo-cut\.json: not valid JSON") as err:
        diff_variants(metrics, tmp_path / "none.json", "grpo", "cut")
    assert "\n" not in str(err.value)
    (metrics / "grpo-cut.json").write_text('{"task": "two_digit"}')
    with pytest.raises(UserError, match=r"grpo-cut\.json: no `seeds`"):
        diff_variants(metrics, tmp_path / "none.json", "grpo", "cut")
    # through the CLI (paths relative to the repository root): status 2, one line on stderr
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports" / "passk-counts.json").write_text('{"n": 64, "coun')
    assert main(["diff", "grpo", "grpo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlvr: error: reports/passk-counts.json: not valid JSON") and err.count("\n") == 1


def test_exact_values_of_a_tiny_paired_case(tmp_path):
    """3 seeds, 2 problems, n = 4: per-seed pass@1 A = (0.5, 0.625, 0.75), B = (0.625, 0.875, 0.75),
    differences (0.125, 0.25, 0): mean 0.125, sd 0.125, t = 0.125 / (0.125 / sqrt 3) = sqrt 3."""
    counts_a = [[1, 3], [2, 3], [3, 3]]
    counts_b = [[2, 3], [4, 3], [3, 3]]
    write_variant(tmp_path, "a", {"eval_acc_final": [0.5, 0.6, 0.7]}, seeds=(0, 1, 2))
    write_variant(tmp_path, "b", {"eval_acc_final": [0.6, 0.8, 0.7]}, seeds=(0, 1, 2))
    counts = {
        **{f"a/seed{s}": c for s, c in enumerate(counts_a)},
        **{f"b/seed{s}": c for s, c in enumerate(counts_b)},
    }
    (tmp_path / "c.json").write_text(json.dumps({"n": 4, "problems": ["x", "y"], "counts": counts}))
    d = diff_variants(tmp_path, tmp_path / "c.json", "a", "b")
    t975 = stats.t.ppf(0.975, 2)

    acc = d["metrics"][0]
    assert acc["delta"]["mean"] == pytest.approx(0.1)
    half = t975 * 0.1 / math.sqrt(3)  # sd of (0.1, 0.2, 0.0) is 0.1
    assert acc["delta"]["ci95"] == pytest.approx([0.1 - half, 0.1 + half])
    assert acc["a"]["ci95"] == pytest.approx([0.6 - half, 0.6 + half])  # sd of (0.5, 0.6, 0.7) is 0.1 too

    p1 = d["passk"][0]
    assert p1["a"]["seeds"] == pytest.approx([0.5, 0.625, 0.75]) and p1["b"]["mean"] == pytest.approx(0.75)
    half = t975 * 0.125 / math.sqrt(3)
    assert p1["delta"]["mean"] == pytest.approx(0.125)
    assert p1["delta"]["ci95"] == pytest.approx([0.125 - half, 0.125 + half])
    assert d["test"]["pvalue"] == pytest.approx(2 * stats.t.sf(math.sqrt(3), 2))
    assert d["test"]["pvalue"] == pytest.approx(stats.ttest_rel(p1["b"]["seeds"], p1["a"]["seeds"]).pvalue)
    assert [r["k"] for r in d["passk"]] == [1, 4]  # k = 8 > n is left out
    assert d["passk"][1]["a"]["seeds"] == [1.0, 1.0, 1.0]  # every problem solved at least once


def test_exact_welch_interval_when_no_chain_is_shared(tmp_path):
    a, b = [0.5, 0.6, 0.7], [0.7, 0.8, 0.9, 0.6]
    write_variant(tmp_path, "a", {"eval_acc_final": a}, seeds=(4, 5, 6))
    write_variant(tmp_path, "b", {"eval_acc_final": b})
    d = diff_variants(tmp_path, tmp_path / "none.json", "a", "b")
    va, vb = np.var(a, ddof=1) / 3, np.var(b, ddof=1) / 4
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 3)
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    mean = np.mean(b) - np.mean(a)
    assert d["metrics"][0]["delta"]["ci95"] == pytest.approx([mean - half, mean + half])
    assert d["test"]["pvalue"] == pytest.approx(stats.ttest_ind(b, a, equal_var=False).pvalue)


def test_diff_cli_on_the_committed_results(capsys, tmp_path):
    """The table and the JSON for two chapter-B variants from reports/ (moved from test_report.py),
    as committed: in a copy, not the working tree (the user's, which `dvc repro` rewrites)."""
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(at_head("reports/metrics"), tmp_path / "reports/metrics")
    shutil.copy(at_head("reports/passk-counts.json"), tmp_path / "reports/passk-counts.json")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["diff", "grpo", "dr_grpo"]) == 0
        table = capsys.readouterr().out
        assert "eval_acc_final" in table and "pass@1" in table
        # grpo ran chains 0-7, dr_grpo 0-3, both from the same start: paired on 0-3
        assert "paired t-test" in table and "paired on the 4 chains both ran" in table
        assert max(len(line) for line in table.splitlines() if not line.startswith("warning:")) <= 100
        assert main(["diff", "grpo", "dr_grpo", "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        assert d["a"] == "grpo" and d["test"]["metric"] == "pass_at_1" and d["test"]["pvalue"] > 1e-10
        assert main(["diff", "grpo", "nope"]) == 2
        assert "variant 'nope': no reports/metrics/grpo-nope.json" in capsys.readouterr().err
    finally:
        os.chdir(cwd)


def test_long_metric_names_never_wrap_or_break_the_columns(tmp_path):
    long = "frac_batch_tokens_with_grad_mean_over_every_step"
    per_seed = {long: [0.4621, 0.1553, 0.7702, 0.3301], "eval_acc_final": [0.62, 0.96, 0.95, 0.09]}
    write_variant(tmp_path, "grpo", per_seed)
    write_variant(tmp_path, "no_kl", {k: [v * 0.99 for v in vs] for k, vs in per_seed.items()})
    d = diff_variants(tmp_path, tmp_path / "none.json", "grpo", "no_kl")
    lines = [line for line in format_diff(d).splitlines() if not line.startswith("warning:")]
    assert max(map(len, lines)) <= 100
    rows = [line for line in lines if line.startswith((long, "eval_acc_final"))]
    assert len(rows) == 2 and all(len(r.split()) >= 4 for r in rows)  # name and values on one line
    header = lines[0]
    assert all(r.rstrip().endswith("]") and len(r) == len(lines[2]) for r in rows)  # aligned columns
    assert header.index("grpo") > len(long)


def test_a_variant_against_itself_says_so(tmp_path):
    write_variant(tmp_path, "grpo", {"eval_acc_final": [0.62, 0.96, 0.95, 0.09]})
    d = diff_variants(tmp_path, tmp_path / "none.json", "grpo", "grpo")
    assert d["warnings"][0].startswith("both sides are grpo: every difference is 0")
    assert format_diff(d).splitlines()[0].startswith("warning: both sides are grpo")


def test_the_reports_table_pairs_each_variant_with_grpo_on_the_chains_both_ran():
    """The report's "Against grpo" rows are `rlvr diff grpo <variant>`'s paired deltas: a variant on
    chains 0-3 against grpo on 0-7 is compared on 0-3, chain by chain."""
    from rlvr.report.tables import against_rows

    def run(variant, seeds, acc):
        return {
            "variant": variant,
            "task": "two_digit",
            "sft": "two_digit",
            "seeds": seeds,
            "per_seed": {"eval_acc_final": acc},
        }

    grpo_acc = [0.6, 0.7, 0.65, 0.5, 0.9, 0.9, 0.9, 0.9]
    metrics = {
        "grpo-grpo.json": run("grpo", list(range(8)), grpo_acc),
        "grpo-kl_reward.json": run("kl_reward", [0, 1, 2, 3], [0.62, 0.69, 0.7, 0.55]),
        "grpo-a_grpo.json": {
            **run("a_grpo", [0, 1], [0.5, 0.5]),
            "task": "single_digit",
            "sft": "single_digit",
        },
    }
    (row,) = against_rows(metrics, None)
    d = [b - a for a, b in zip(grpo_acc[:4], [0.62, 0.69, 0.7, 0.55])]
    assert row[:2] == ["kl_reward", "0-3"] and row[2].startswith(f"{sum(d) / 4:+.3f} [")
    assert row[3:] == ["–", "–", "–", "–"]  # no pass@k counts: nothing to decide
    ended = {**metrics, "grpo-grpo_end.json": {**run("grpo_end", [0, 1, 2, 3], [0.8] * 4), "target": 0.83}}
    assert [r[0] for r in against_rows(ended, None)] == ["kl_reward"]  # not at grpo's steps: left out
    assert against_rows({"grpo-kl_reward.json": metrics["grpo-kl_reward.json"]}, None) == []  # no grpo


def test_holm_adjusts_a_family_of_p_values_step_down():
    from rlvr.report.matrix import holm

    assert holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])
    assert holm([0.5, 0.9]) == [1.0, 1.0]  # 2 x 0.5 capped at 1, then made non-decreasing
    assert holm([]) == []


def test_the_matrix_decides_different_equivalent_or_undecided_with_the_chains_that_would_decide():
    """Three cells, one family: a large consistent drop is different, a tight cell near 0 is
    equivalent within 0.02, a wide cell near 0 is undecided and names a count of chains at which its
    equivalence test would pass (more than it has), a tight small shift is both; a one-chain cell
    has no spread names no count."""
    from rlvr.report.matrix import Cell, chains_to_decide, decide

    big, tight, wide, small = (
        Cell(-0.10, 0.01, 32),
        Cell(0.0, 0.005, 32),
        Cell(0.004, 0.05, 8),
        Cell(0.01, 0.005, 32),
    )
    out = decide([big, tight, wide, small])
    assert out[0] == "different"
    assert out[1] == "equivalent within ±0.02"
    assert out[3] == "different, within ±0.02"  # real, and too small to matter
    assert out[2].startswith("undecided (~")
    need = int(out[2].split("~")[1].split()[0])
    assert need > wide.n and need == chains_to_decide(wide, 0.05 / 8)
    assert decide([Cell(0.0, None, 1)]) == ["undecided (no count decides it)"]


def test_equivalence_p_is_the_larger_one_sided_p_and_refuses_a_mean_outside_the_margin():
    from scipy import stats

    from rlvr.report.matrix import Cell

    c = Cell(0.005, 0.02, 16)  # se 0.005: t = (0.005 + 0.02) / 0.005 = 5 and (0.005 - 0.02) / 0.005 = -3
    assert c.p_equivalence(0.02) == pytest.approx(max(stats.t.sf(5, 15), stats.t.cdf(-3, 15)))
    assert Cell(0.03, 0.001, 16).p_equivalence(0.02) > 0.99
    assert c.p_difference() == pytest.approx(2 * stats.t.sf(1.0, 15))


def test_the_powered_plan_declares_the_margin_the_matrix_uses():
    import yaml

    from rlvr.report.matrix import MARGIN

    plan = yaml.safe_load((ROOT / "powered" / "experiments" / "plan.yaml").read_text())
    assert plan["matrix"]["margin"] == MARGIN


def test_diff_names_the_settings_two_runs_differ_in_and_ends_with_a_verdict_per_headline_metric():
    from rlvr.report.compare import config_differences, difference_word, headline_verdicts

    configs = {
        "a_no_std": {"lr": 0.004, "advantage": "mean_only", "beta": 0.04},
        "a_grpo": {"lr": 0.003, "advantage": "group", "beta": 0.04},
    }
    assert config_differences(configs, "a_grpo", "a_no_std") == [
        {"key": "advantage", "a": "group", "b": "mean_only"},
        {"key": "lr", "a": 0.003, "b": 0.004},
    ]
    assert (
        config_differences(configs, "a_grpo", "gone") is None and config_differences(None, "a", "b") is None
    )
    assert difference_word({"ci95": [0.01, 0.03]}) == "higher"
    assert difference_word({"ci95": [-0.03, -0.01]}) == "lower"
    assert difference_word({"ci95": [-0.01, 0.03]}) == "no difference shown at 95%"
    assert difference_word({"ci95": None}).startswith("no interval")
    d = {
        "a": "grpo",
        "b": "dapo",
        "metrics": [
            {"metric": "eval_acc_final", "delta": {"mean": 0.02, "ci95": [0.01, 0.03], "paired": True}}
        ],
        "passk": [
            {"k": 1, "delta": {"mean": 0.0, "ci95": [-0.01, 0.01]}},
            {"k": 64, "delta": {"mean": -0.02, "ci95": [-0.03, -0.01]}},
        ],
    }
    lines = headline_verdicts(d)
    assert lines[0].startswith("verdict eval_acc_final: dapo is higher than grpo (dapo - grpo = +0.02 [")
    assert lines[1].startswith("verdict pass@1: no difference shown at 95%")
    assert lines[2].startswith("verdict pass@64: dapo is lower than grpo")


def test_diff_help_says_what_its_two_arguments_are():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "rlvr", "diff", "--help"], capture_output=True, text=True)
    assert "variant A, the reference" in out.stdout and "every difference is B - A" in out.stdout


def test_a_diff_of_runs_made_on_different_cpus_says_so_first(tmp_path, monkeypatch):
    """The run records name each stage's CPU; B - A across two CPUs mixes the change with the
    machines' float drift, so the diff's first warning says so (one CPU, or none known: no warning)."""
    from rlvr.cli import variant_machines

    metrics = tmp_path / "reports/metrics"
    write_variant(metrics, "grpo", {"eval_acc_final": [0.5, 0.6, 0.55, 0.52]})
    write_variant(metrics, "dapo", {"eval_acc_final": [0.6, 0.6, 0.58, 0.57]})
    runs = tmp_path / "reports/runs"
    runs.mkdir()
    (runs / "grpo-grpo.json").write_text(json.dumps({"made": {"cpu": "Intel Xeon (family 6, model 143)"}}))
    (runs / "grpo-dapo.json").write_text(json.dumps({"made": {"cpu": "AMD EPYC (family 25, model 17)"}}))
    monkeypatch.chdir(tmp_path)
    machines = variant_machines("grpo", "dapo")
    assert machines == {"grpo": "Intel Xeon (family 6, model 143)", "dapo": "AMD EPYC (family 25, model 17)"}
    d = diff_variants(metrics, tmp_path / "none.json", "grpo", "dapo", machines=machines)
    assert d["warnings"][0].startswith(
        "made on different CPUs (grpo: Intel Xeon (family 6, model 143); dapo: AMD"
    )
    same = {"grpo": machines["dapo"], "dapo": machines["dapo"]}
    for quiet in (same, None, {}):
        d = diff_variants(metrics, tmp_path / "none.json", "grpo", "dapo", machines=quiet)
        assert not any("CPU" in w for w in d["warnings"])
    (runs / "grpo-grpo.json").write_text(json.dumps({"made": {"host": "box"}}))  # an older record
    d = diff_variants(
        metrics, tmp_path / "none.json", "grpo", "dapo", machines=variant_machines("grpo", "dapo")
    )
    assert (
        d["warnings"][0]
        == "grpo's run record does not name its CPU: whether both ran on one machine is unknown"
    )
    (runs / "grpo-grpo.json").write_text("{not json")
    with pytest.raises(UserError, match="grpo-grpo.json"):
        variant_machines("grpo", "dapo")


def test_the_matrix_says_how_many_variants_both_metrics_decide_and_names_the_others():
    from rlvr.report.sections import decided_line

    rows = [
        ["a", "1, 2", "x", "x", "x", "different", "equivalent within ±0.02"],
        ["b", "1, 2", "x", "x", "x", "undecided (~40 chains)", "equivalent within ±0.02"],
        ["c", "1, 2", "x", "–", "–", "–", "–"],
    ]
    assert decided_line(rows) == "Decided on both metrics: 1 of 3 variants. Not yet: b, c."


def test_a_run_of_chains_is_written_as_a_range():
    from rlvr.report.tables import chains_text

    assert chains_text(list(range(200, 232))) == "200-231"
    assert chains_text([1, 2]) == "1, 2" and chains_text([1, 3, 4]) == "1, 3, 4"
