"""A second look of the plan (experiments/plan.yaml `looks`): chains added to an SFT run after its
first results were seen. Every claim whose chains include one of them is decided at the look's
level (Pocock's 97.2% for two looks); claims on the first look's chains alone, or on another run's
chains of the same seed numbers, stay at 95%. A malformed plan is one line."""

import pytest
import yaml
from conftest import ROOT

from rlvr.fields import ConfigError
from rlvr.report.claims import Claim, Look, read_looks
from rlvr.report.claimtext import interval_text
from rlvr.report.evidence import claim_level, judge, verdict_record
from rlvr.report.verdict import chains_needed, reason
from rlvr.stats import share_interval

BASE = {"chapter": "B", "quote": "q", "text": "More runs than not reach the controlled end.", "why": "w"}
SHARE = {"kind": "greater", "book": 0.5, "other_value": 0.5, "estimand": "share", "sesoi": 0.25}
LOOK = {"two_digit": Look("two_digit", 0.972, tuple(range(100, 108)), tuple(range(108, 116)))}


def runs_file(reached: list[float], seeds: list[int], run: str = "two_digit") -> dict:
    """A GRPO metrics file from SFT run `run`: one end_reached per chain."""
    return {
        "g.json": {
            "sft": run,
            "seeds": seeds,
            "end_reached": sum(reached) / len(reached),
            "per_seed": {"end_reached": reached},
        }
    }


def share_claim() -> Claim:
    return Claim(id="c", **BASE, **SHARE, metric=["g.json", "end_reached"], feasible=[0, 1])


def test_the_committed_plans_second_look_names_the_clean_starts_chains_only():
    """The second look was chapter B's clean start (chains 100-115); its slip-spread start runs on
    fresh chains, one look at 95%, so no chain params.yaml runs may fall under it."""
    looks = read_looks(ROOT / "experiments/plan.yaml")
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    look = looks["two_digit"]
    assert look.level == 0.972 and not set(look.first) & set(look.second)
    assert list(look.first + look.second) == list(range(100, 116))
    running = set(params["sft"]["two_digit"]["seeds"]) | set(params["variants"]["grpo_end"]["seeds"])
    assert not set(look.first + look.second) & running


def test_a_claim_on_the_second_looks_chains_is_decided_at_its_level():
    seeds = list(range(100, 116))
    assert claim_level(share_claim(), runs_file([1.0] * 16, seeds), LOOK) == 0.972
    # the first look's chains alone: looked at once
    assert claim_level(share_claim(), runs_file([1.0] * 8, seeds[:8]), LOOK) == 0.95
    # another run's chains with the same seed numbers are other chains
    assert claim_level(share_claim(), runs_file([1.0] * 16, seeds, "single_digit"), LOOK) == 0.95
    assert claim_level(share_claim(), runs_file([1.0] * 16, seeds), {}) == 0.95


def test_thirteen_of_sixteen_runs_decide_the_share_at_the_second_look_and_twelve_do_not():
    seeds = list(range(100, 116))
    thirteen = judge(share_claim(), runs_file([1.0] * 13 + [0.0] * 3, seeds), LOOK)
    twelve = judge(share_claim(), runs_file([1.0] * 12 + [0.0] * 4, seeds), LOOK)
    assert thirteen.verdict == "reproduced" and twelve.verdict == "inconclusive"
    assert (thirteen.tested.lo, thirteen.tested.hi) == share_interval(13, 16, 0.972)
    assert share_interval(12, 16, 0.95)[0] < 0.5  # twelve would not do at 95% either
    # the level widens the interval it is decided on, and report.json says which level
    at_95 = judge(share_claim(), runs_file([1.0] * 13 + [0.0] * 3, seeds))
    assert thirteen.tested.lo < at_95.tested.lo and thirteen.tested.hi > at_95.tested.hi
    assert verdict_record(thirteen)["level"] == 0.972 and verdict_record(at_95)["level"] == 0.95


def test_a_mean_and_a_paired_difference_widen_at_the_second_look():
    seeds = list(range(100, 116))
    values = [0.50 + 0.01 * (i % 5) for i in range(16)]
    metrics = {
        "sft-two_digit.json": {
            "seeds": seeds,
            "acc": 0.52,
            "base": 0.4,
            "per_seed": {"acc": values, "base": [0.4] * 16},
        }
    }
    exact = {"kind": "exact", "book": 0.53, "tol": 0.03, "feasible": [0, 1]}
    claim = Claim(id="m", **BASE, **exact, metric=["sft-two_digit.json", "acc"])
    at_look, at_95 = judge(claim, metrics, LOOK), judge(claim, metrics)
    assert at_look.tested.hi - at_look.tested.lo > at_95.tested.hi - at_95.tested.lo
    greater = {"kind": "greater", "book": 0.0, "margin": 0.0, "feasible": [0, 1]}
    paired = Claim(
        id="d", **BASE, **greater, metric=["sft-two_digit.json", "acc"], other=["sft-two_digit.json", "base"]
    )
    d_look, d_95 = judge(paired, metrics, LOOK).tested, judge(paired, metrics).tested
    assert d_look.level == 0.972 and d_look.hi - d_look.lo > d_95.hi - d_95.lo


def test_the_report_names_a_second_looks_level_and_says_nothing_at_95():
    seeds = list(range(100, 116))
    row = judge(share_claim(), runs_file([1.0] * 15 + [0.0], seeds), LOOK)
    assert interval_text(row.tested).endswith("(16 chains; 97.2% interval, the plan's second look)")
    row95 = judge(share_claim(), runs_file([1.0] * 7 + [0.0], seeds[:8]), LOOK)
    assert interval_text(row95.tested).endswith("(8 chains)")
    undecided = judge(share_claim(), runs_file([1.0] * 12 + [0.0] * 4, seeds), LOOK)
    assert "(16 chains; 97.2% interval, the plan's second look) straddles the bound 0.5" in reason(undecided)
    assert "97.2%" not in reason(row95)


def test_chains_needed_counts_at_the_level_decided_on():
    seeds = list(range(100, 116))
    metrics = runs_file([1.0] * 14 + [0.0] * 2, seeds)
    claim = share_claim()
    at_look, at_95 = judge(claim, metrics, LOOK), judge(claim, metrics)
    assert chains_needed(at_look.tested, claim) > chains_needed(at_95.tested, claim)


@pytest.mark.parametrize(
    "look, says",
    [
        ("[two_digit]", "looks must map an SFT run"),
        ("{two_digit: {level: 0.972, first: [1]}}", "must give exactly level, first, second and why"),
        ("{two_digit: {level: 0.9, first: [1], second: [2], why: w}}", "level = 0.9: must lie between"),
        ("{two_digit: {level: 1.0, first: [1], second: [2], why: w}}", "level = 1.0: must lie between"),
        ("{two_digit: {level: 0.972, first: [1], second: [], why: w}}", "second: must be a non-empty"),
        ("{two_digit: {level: 0.972, first: [1], second: ['2'], why: w}}", "second: must be a non-empty"),
        ("{two_digit: {level: 0.972, first: [1, 2], second: [2], why: w}}", "must be new (shared: [2])"),
        ("{two_digit: {level: 0.972, first: [1], second: [2], why: w}", "not valid YAML"),
    ],
)
def test_a_malformed_look_is_refused_in_one_line(tmp_path, look, says):
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"looks: {look}\n")
    with pytest.raises(ConfigError) as err:
        read_looks(plan)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_plan_without_looks_has_none_and_a_missing_plan_is_one_line(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("stopping: one look\n")
    assert read_looks(plan) == {}
    with pytest.raises(ConfigError, match="no such file"):
        read_looks(tmp_path / "nope.yaml")
