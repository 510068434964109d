"""Claim kinds (measured, calibrated, closed-form, cited), full-sentence texts, notes, feasible ranges,
the one crossover definition everywhere, and the report header that names its run."""

import json

import pytest
from conftest import ROOT

from rlvr.fields import ConfigError
from rlvr.report.claims import Claim, check_claims, load_claims
from rlvr.report.claimtext import counts_line, ours_text, per_chain_text, verdict_word
from rlvr.report.evidence import class_counts, judge
from rlvr.report.layout import header_line
from rlvr.report.verdict import Judged

BASE = {"chapter": "B", "quote": "q", "text": "The model solves about seven problems in all.", "why": "w"}


def entry(**kw) -> dict:
    """A claims.yaml entry, as the file holds it."""
    return {"id": "c", **BASE, **kw}


def claim(**kw) -> Claim:
    return Claim(**entry(**kw))


def judged(category: str, verdict: str) -> Judged:
    """A claim of `category` (measured, calibrated, closed-form, cited) judged `verdict`."""
    kinds = {
        "measured": claim(kind="exact", metric=["m.json", "k"]),
        "calibrated": claim(kind="exact", metric=["m.json", "k"], calibrated=True),
        "closed-form": claim(kind="exact", metric=["worked.json", "k"]),
        "cited": claim(kind="cited"),
    }
    return Judged(kinds[category], verdict)


def test_a_count_interval_is_cut_to_what_a_count_can_take():
    # four spread-out chains: the raw t-interval of the mean reaches far below 0
    m = {"p.json": {"seeds": [0, 1, 2, 3], "never": 9.0, "per_seed": {"never": [26, 0, 0, 10]}}}
    raw = judge(claim(kind="range", lo=5, hi=9, book=7, metric=["p.json", "never"]), m)
    assert raw.evidence.lo < 0
    cut = judge(claim(kind="range", lo=5, hi=9, book=7, metric=["p.json", "never"], feasible=[0, 300]), m)
    assert cut.evidence.lo == 0 and cut.evidence.hi == raw.evidence.hi
    assert cut.verdict == raw.verdict == "inconclusive"


def test_a_rate_interval_and_its_one_new_chain_interval_never_pass_1():
    m = {"p.json": {"seeds": [0, 1, 2, 3], "acc": 0.66, "per_seed": {"acc": [0.62, 0.96, 0.95, 0.09]}}}
    res = judge(claim(kind="exact", book=0.83, tol=0.03, metric=["p.json", "acc"], feasible=[0, 1]), m)
    assert res.evidence.hi == 1.0 and 0 <= res.evidence.lo
    assert res.tested == res.evidence  # decided on the chain mean's interval, cut to [0, 1]
    assert res.consistency["interval"] == [0, 1] and res.consistency["verdict"] == "consistent"
    assert res.verdict == "inconclusive"


def test_a_paired_difference_is_cut_to_the_span_of_two_rates():
    m = {
        "p.json": {
            "seeds": [0, 1, 2],
            "a": 0.5,
            "b": 0.5,
            "per_seed": {"a": [1.0, 0.0, 1.0], "b": [0.0, 1.0, 0.0]},
        }
    }
    res = judge(claim(kind="greater", metric=["p.json", "a"], other=["p.json", "b"], feasible=[0, 1]), m)
    assert -1 <= res.tested.lo and res.tested.hi <= 1


def test_every_claim_has_a_class_and_the_calibrated_ones_are_matched_not_reproduced():
    claims = load_claims(ROOT / "experiments/claims.yaml")
    classes = {c.id: c.category for c in claims}
    assert classes["A1-mean"] == "closed-form" and classes["C-distill"] == "cited"
    assert classes["B-grpo-pass1"] == "measured" and classes["A-sft-start"] == "calibrated"
    assert verdict_word(judged("calibrated", "reproduced")) == "matched"
    assert verdict_word(judged("calibrated", "differs")) == "not matched"
    assert verdict_word(judged("measured", "reproduced")) == "reproduced"


def test_the_first_line_leads_with_measured_claims():
    rows = [
        judged("measured", "reproduced"),
        judged("measured", "inconclusive"),
        judged("calibrated", "reproduced"),
        judged("closed-form", "reproduced"),
        judged("cited", "cited"),
    ]
    line = counts_line(class_counts(rows), bold=False)
    assert line.startswith("Measured claims: 1 reproduced, 1 inconclusive (of 2)")
    assert "calibrated: all 1 matched" in line and "closed-form and worked examples: all 1 reproduced" in line
    assert "cited facts: 1" in line


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("text", "to 0.83", "must be a full sentence"),
        ("text", "GRPO 0.977", "must be a full sentence"),
        ("note", "fragment", "note: must be full sentences"),
        ("calibrated", "yes", "calibrated = 'yes': must be true or false"),
        ("feasible", [1, 0], "feasible = \\[1, 0\\]"),
        ("GB = 1e9", None, "GB = 1e9: unknown field"),  # an unquoted comma in a flow mapping makes a key
    ],
)
def test_fragments_and_bad_fields_are_rejected(field, value, match):
    c = entry(kind="exact", book=1, tol=0, metric=["m.json", "k"], **{field: value})
    with pytest.raises(ConfigError, match=match):
        check_claims([c], "claims.yaml")


def test_every_committed_claim_text_is_a_sentence_and_rates_name_their_range():
    for c in load_claims(ROOT / "experiments/claims.yaml"):
        assert c.text != c.quote
        if c.category in ("measured", "calibrated"):
            assert c.feasible is not None, c.id


def test_per_chain_values_show_the_differences_a_paired_claim_was_decided_on():
    m = {"s.json": {"seeds": [0, 1], "a": 0.5, "b": 0.3, "per_seed": {"a": [0.4, 0.6], "b": [0.3, 0.3]}}}
    c = claim(kind="greater", metric=["s.json", "a"], other=["s.json", "b"])
    row = judge(c, m)
    assert per_chain_text(row) == " Per chain of ours − b: 0.1, 0.3."
    crossing = claim(kind="range", lo=8, hi=16, book=12, metric=["s.json", "k"])
    m["s.json"].update(k=16, per_seed={**m["s.json"]["per_seed"], "k": [16, None]})
    assert ours_text(judge(crossing, m)) == "per chain 16, none (2 chains, 1 undefined)"


def test_the_crossover_is_the_same_number_in_claim_figure_and_sweep():
    from rlvr.passk_summary import summarise_counts
    from rlvr.report.passkplots import crossover_label
    from rlvr.report.sweep import sweep_rows

    n = 8
    counts = {
        # chain 0: RL ahead at k = 1 and below SFT by k = 4 (crosses); chain 1: ahead, then level at k = 8
        "sft/seed0": [2, 2, 2, 2],
        "v/seed0": [8, 8, 8, 0],
        "sft/seed1": [2, 2, 2, 2],
        "v/seed1": [6, 6, 6, 6],
    }
    metrics, _ = summarise_counts(counts, {"sft": [0, 1], "v": [0, 1]}, n, [1, 8], 20, 0)
    v = metrics["variants"]["v"]
    assert v["crossover_per_chain"] == ["4", "RL ahead to k = 8"]  # a level end is no crossing
    assert v["crossover_k"] == 5  # the chain-mean curves: mean(RL - SFT) first below 0 at k = 5
    assert (v["chains"], v["chains_crossing"]) == (2, 1)  # the same, as numbers DVC can diff
    assert "k = 4" in crossover_label("v", v["crossover_per_chain"], n)
    shown = json.loads(json.dumps(metrics))  # as `dvc exp show --json` gives it: lists dropped
    shown["variants"]["v"] = {
        k: x for k, x in shown["variants"]["v"].items() if not isinstance(x, (list, dict))
    }
    exp = {
        "name": "e",
        "params": {"x": 1, "passk.ks": [1, 8]},
        "passk": {"sft": metrics["sft"], "variants": shown["variants"]},
    }
    _, rows = sweep_rows([exp, {**exp, "name": "f", "params": {"x": 2, "passk.ks": [1, 8]}}], variant="v")
    assert rows[0][-2] == "5 (1/2)"
    c = claim(kind="range", lo=8, hi=16, book=12, metric=["passk.json", "variants.v.crossover_k"])
    assert ours_text(judge(c, {"passk.json": metrics})).startswith("5 ")
    assert crossover_label("v", ["tie", "RL not ahead at k = 1"], n) == "v: no crossover up to 8"


def test_the_header_names_commit_state_machine_and_versions():
    run = {
        "commit": "abc1234",
        "changed": [],
        "date": "2026-12-01 12:00 UTC",
        "cpu": "Some CPU",
        "cores": 2,
        "threads": 2,
        "torch": "2.13.0",
        "dvc": "3.67.1",
        "mlflow": "3.17.2",
        "python": "3.11.7",
    }
    line = header_line(run)
    for part in ("`abc1234` (as committed)", "Some CPU, 2 cores", "2 threads", "torch 2.13.0", "DVC 3.67.1"):
        assert part in line
    assert "uncommitted changes to rlvr/grpo.py" in header_line({**run, "changed": ["rlvr/grpo.py"]})
    assert "not a git checkout" in header_line({**run, "changed": None})


def test_starts_rescore_recomputes_from_the_stored_counts_only(tmp_path, tiny_params):
    from rlvr.fields import UserError
    from rlvr.tools.starts import rescore_starts

    n = 8
    counts = {
        "sft/seed0": [2, 2, 2, 2],
        "grpo/seed0": [8, 8, 8, 0],
        "sft/seed1": [2, 2, 2, 2],
        "grpo/seed1": [6, 6, 6, 6],
    }
    old = {
        "made": "`rlvr starts` at commit abc, 2026-01-01, Some CPU",
        "n": n,
        "problems": 4,
        "sft_side_choice": "two_digit",
        "starts": {"two_digit": {"counts": counts, "crossover_k_per_chain": [4, 7]}},  # 7: a tie, counted
    }
    at_06 = {k: [min(c + 1, n) for c in v] for k, v in counts.items()}
    old_with_temperatures = {
        **old,
        "temperatures": [1.0, 0.6],
        "starts": {"two_digit": {**old["starts"]["two_digit"], "counts_by_temperature": {"0.6": at_06}}},
    }
    out = tmp_path / "starts.json"
    with pytest.raises(UserError, match="run `rlvr starts` first"):
        rescore_starts(tiny_params, out, tmp_path / "f.png")
    out.write_text(json.dumps(old))
    rescore_starts(tiny_params, out, tmp_path / "f.png")
    new = json.loads(out.read_text())
    assert new["starts"]["two_digit"]["crossover_k_per_chain"] == ["4", "RL ahead to k = 8"]
    assert new["starts"]["two_digit"]["counts"] == counts and (tmp_path / "f.png").is_file()
    assert new["made"].startswith(old["made"] + "; rescored from its counts by `rlvr starts --rescore`")
    assert new["starts"]["two_digit"]["counts_by_temperature"] == {}  # made before temperatures: none
    out.write_text(json.dumps(old_with_temperatures))
    rescore_starts(tiny_params, out, tmp_path / "f.png")
    new = json.loads(out.read_text())
    assert new["temperatures"] == [1.0, 0.6]
    assert new["starts"]["two_digit"]["counts_by_temperature"] == {"0.6": at_06}


def test_the_controlled_ends_table_counts_the_runs_that_got_there_and_their_steps():
    from rlvr.report.chains import end_chain_rows, end_rows

    nan = float("nan")
    m = {
        "grpo-e.json": {
            "variant": "e",
            "seeds": [0, 1, 2],
            "target": 0.83,
            "steps_cap": 800,
            "per_seed": {
                "end_reached": [1.0, 1.0, 0.0],
                "end_steps": [150.0, 250.0, nan],
                "end_val": [0.831, 0.834, 0.71],
                "eval_acc_final": [0.82, 0.84, 0.7],
            },
        },
        "grpo-f.json": {"variant": "f", "seeds": [0], "target": None, "per_seed": {}},  # a fixed budget
    }
    (row,) = end_rows(m)
    assert row[:3] == ["e", "0.83 (cap 800 steps)", "2 of 3"]
    # Kaplan-Meier over all three runs, the third censored at the cap: S = 2/3 after 150 steps, 1/3
    # after 250 (the median); the band's upper curve never falls to one half: "not reached"
    assert row[3] == "250 [150, not reached]; 1 of 3 censored at 800"
    rows = end_chain_rows(m)
    assert [r[2] for r in rows] == ["reached", "reached", "censored (cap came first)"]
    assert rows[2][3] == "> 800"


def end_metrics(pass1: list[float], reached: list[float]) -> dict:
    """Synthetic chapter B results at the controlled end: each chain's held-out pass@1 there (or
    where its cap stopped it) and whether it reached the end."""
    seeds = list(range(100, 100 + len(pass1)))
    return {
        "passk.json": {
            "sft_run": "two_digit",
            "variants": {
                "grpo_end": {
                    "seeds": seeds,
                    "pass_at_1_rl": sum(pass1) / len(pass1),
                    "per_seed": {"pass_at_1_rl": pass1},
                }
            },
        },
        "grpo-grpo_end.json": {
            "variant": "grpo_end",
            "sft": "two_digit",
            "seeds": seeds,
            "target": 0.83,
            "steps_cap": 900,
            "per_seed": {"end_reached": reached},
        },
    }


def test_b_grpo_pass1_can_come_out_reproduced_differs_or_inconclusive():
    """The chapter's "from 51% to over 80%" is decided on held-out pass@1 at the end over every
    chain: runs above 0.80 reproduce it; runs that stall below it say it differs; a spread across
    0.80 cannot tell. A run that missed the end counts where it stopped."""
    (c,) = [c for c in load_claims(ROOT / "experiments" / "claims.yaml") if c.id == "B-grpo-pass1"]
    every = [1.0] * 8
    assert (
        judge(c, end_metrics([0.84, 0.842, 0.838, 0.845, 0.836, 0.841, 0.839, 0.843], every)).verdict
        == "reproduced"
    )
    stalled = [0.70, 0.702, 0.698, 0.705, 0.696, 0.701, 0.699, 0.703]
    assert judge(c, end_metrics(stalled, [0.0] * 6 + [1.0] * 2)).verdict == "differs"
    spread = judge(c, end_metrics([0.86, 0.75, 0.84, 0.78, 0.83, 0.76, 0.85, 0.79], every))
    assert spread.verdict == "inconclusive"
    censored = judge(
        c, end_metrics([0.84, 0.842, 0.838, 0.845, 0.836, 0.841, 0.839, 0.60], every[:7] + [0.0])
    )
    assert censored.evidence.per_seed[-1] == 0.60 and censored.sensitivity.verdict == "reproduced"


def test_a_profiles_report_shows_each_measured_claim_beside_the_other_plans_and_which_decides():
    from rlvr.report.document import Table
    from rlvr.report.layout import beside_blocks

    m = {"m.json": {"seeds": [0, 1, 2], "k": 7.0, "per_seed": {"k": [6.9, 7.0, 7.1]}}}
    rows = [
        judge(claim(id="A-one", kind="exact", book=7, tol=0.5, metric=["m.json", "k"]), m),
        judged("closed-form", "reproduced"),
    ]
    other = {"A-one": {"verdict": "inconclusive", "tested_interval": [6.0, 7.5], "source": "4 chains; note"}}
    blocks = beside_blocks(rows, {"path": "../reports/report.json", "claims": other, "md5": "x"})
    (table,) = [b for b in blocks if isinstance(b, Table)]
    assert [r[0] for r in table.rows] == ["**A-one**"]  # measured and calibrated claims only
    this, that, by = table.rows[0][1:]
    assert this.endswith(": reproduced") and that == "[6, 7.5] (4 chains): inconclusive" and by == "this plan"
    assert "../reports/report.json" in blocks[1].text


def test_the_header_names_the_plan_a_profile_tests():
    made = dict.fromkeys(
        ("date", "commit", "cpu", "cores", "threads", "torch", "dvc", "mlflow", "python"), "x"
    )
    line = header_line(
        {**made, "changed": [], "plan": "powered/experiments/plan.yaml", "plan_commit": "abc1234"}
    )
    assert "`powered/experiments/plan.yaml` as committed at `abc1234`" in line
