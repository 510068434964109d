"""The verdict rule (rlvr.report.verdict): an equivalence test on the deciding interval, "differs"
only where one run like the book's could not have shown the book's value, no verdict from fewer
than two chains or from a chain without a value, "not comparable" at an end the chains never
reached, the book's consistency with one run shown beside it and never counted, and the reason and
precision an undecided claim gives."""

import math
import random
import statistics
import subprocess
import sys
from dataclasses import replace

import pytest
from conftest import ROOT

from rlvr.report.claims import Claim
from rlvr.report.claimtext import counts_line, ours_text
from rlvr.report.evidence import class_counts, judge, judge_all, summary_counts, verdict_record
from rlvr.report.verdict import (
    MAX_CHAINS,
    Evidence,
    by_interval,
    chains_needed,
    consistency,
    decide,
    num,
    precision,
    reason,
)
from rlvr.stats import one_run_interval, share_interval, t_quantile

BASE = {"chapter": "B", "quote": "q", "text": "The model solves about seven problems in all.", "why": "w"}
SEVEN = {"kind": "exact", "book": 7, "tol": 2, "feasible": [0, 300]}  # "about 7 never solved, +-2"


def chains_file(chains, key="k", **extra):
    """A metrics file with one value per chain for `key`, as a multi-seed stage writes it."""
    defined = [c for c in chains if c is not None]
    mean = statistics.fmean(defined) if defined else None
    return {
        "p.json": {"seeds": list(range(len(chains))), key: mean, "per_seed": {key: list(chains)}, **extra}
    }


def decided(chains, claim=SEVEN, **extra):
    """The row of `claim` on metric p.json k measured over `chains`."""
    return judge(Claim(id="c", **BASE, **claim, metric=["p.json", "k"]), chains_file(chains, **extra))


def test_a_wildly_spread_chain_set_is_not_reproduced():
    # the review's case: one chain at 60 and three at 0 against the book's 7 +- 2
    row = decided([60, 0, 0, 0])
    assert row.verdict == "inconclusive"
    assert row.tested.lo == 0 and row.tested.hi > 9  # cut to the feasible range, wider than the band
    assert row.consistency["verdict"] == "consistent"  # 7 is what one more such chain could give


def test_less_spread_never_scores_worse_than_more_in_the_reviews_three_chain_sets():
    verdicts = [decided(c).verdict for c in ([60, 0, 0, 0], [9, 9, 10, 9], [12, 12, 13, 12])]
    assert verdicts == ["inconclusive", "inconclusive", "differs"]  # none is reproduced


def test_tight_chains_inside_the_band_are_reproduced():
    row = decided([7.0, 7.2, 6.9, 7.1, 7.0, 6.8, 7.1, 7.0])
    assert row.verdict == "reproduced" and 5 < row.tested.lo < row.tested.hi < 9


def test_tight_chains_wholly_outside_the_band_differ():
    row = decided([12, 12.1, 11.9, 12])
    assert row.verdict == "differs" and row.tested.lo > 9
    assert row.consistency["verdict"] == "not consistent"


def test_tight_chains_inside_the_band_are_reproduced_even_when_the_book_is_not_consistent_with_them():
    row = decided([8.5, 8.6, 8.4, 8.5])  # inside 7 +- 2, but no chain of ours would give 7
    assert row.verdict == "reproduced" and row.consistency["verdict"] == "not consistent"


def _random_claim(rng: random.Random) -> dict:
    kind = rng.choice(["exact", "range", "greater", "less"])
    if kind == "exact":
        return {"kind": kind, "book": rng.uniform(-1, 1), "tol": rng.uniform(0.01, 0.5)}
    if kind == "range":
        lo = rng.uniform(-1, 0.5)
        return {"kind": kind, "book": lo, "lo": lo, "hi": lo + rng.uniform(0.05, 1)}
    return {"kind": kind, "book": 0.0, "other_value": rng.uniform(-0.5, 0.5), "margin": rng.uniform(0, 0.2)}


def test_more_spread_never_improves_a_verdict():
    """Scaling every chain's deviation from the chain mean by a factor > 1 widens the deciding
    interval around the same mean: a claim that was not reproduced never becomes reproduced, and an
    inconclusive one stays inconclusive (order: reproduced above inconclusive; differs never turns
    into reproduced). Over many random chain sets and claims, some cut to a feasible range."""
    rng = random.Random(20261201)
    seen = set()
    for _ in range(600):
        claim = _random_claim(rng)
        if rng.random() < 0.5:
            claim["feasible"] = [-1.0, 1.0]
        n = rng.randint(2, 8)
        center, sd = rng.uniform(-1, 1), rng.choice([0.01, 0.05, 0.2, 0.5])
        chains = [rng.gauss(center, sd) for _ in range(n)]
        mean = statistics.fmean(chains)
        factor = rng.uniform(1.05, 6)
        wider = [mean + factor * (x - mean) for x in chains]
        before, after = decided(chains, claim).verdict, decided(wider, claim).verdict
        seen.add(before)
        if before != "reproduced":
            assert after != "reproduced", (claim, chains, factor)
        if before == "inconclusive":
            assert after == "inconclusive", (claim, chains, factor)
    assert seen == {"reproduced", "inconclusive", "differs"}  # the draws exercise every verdict


def test_the_consistency_result_never_changes_the_counts():
    sets = {"a": [60, 0, 0, 0], "b": [8.5, 8.6, 8.4, 8.5], "c": [12, 12.1, 11.9, 12], "d": [7.0, 7.1, 6.9]}
    claims = [Claim(id=cid, **BASE, **SEVEN, metric=[f"{cid}.json", "k"]) for cid in sets]
    metrics = {f"{cid}.json": chains_file(v)["p.json"] for cid, v in sets.items()}
    rows = judge_all(claims, metrics)
    assert {r.consistency["verdict"] for r in rows} == {"consistent", "not consistent"}
    stripped = [replace(r, consistency=None) for r in rows]
    flipped = [
        replace(r, consistency={**r.consistency, "verdict": "consistent"}) for r in rows
    ]  # every book consistent: the counts still follow the verdicts alone
    for other in (stripped, flipped):
        assert class_counts(other) == class_counts(rows) and summary_counts(other) == summary_counts(rows)
        assert counts_line(class_counts(other)) == counts_line(class_counts(rows))


def test_consistency_is_the_prediction_interval_for_one_run_like_the_books():
    chains = [0.50, 0.55, 0.60, 0.53]
    one_run = one_run_interval(chains)
    ev = Evidence(statistics.fmean(chains), 0.0, 1.0, "4 chains", chains, one_run=one_run)
    c = consistency(ev, Claim(id="c", kind="exact", book=0.56, tol=0.02))
    half = 3.182446305284263 * statistics.stdev(chains) * (1 + 1 / 4) ** 0.5  # t(0.975, 3) s sqrt(1 + 1/n)
    assert c["verdict"] == "consistent"
    assert c["interval"] == pytest.approx([statistics.fmean(chains) - half, statistics.fmean(chains) + half])
    assert consistency(ev, Claim(id="c", kind="exact", book=0.83, tol=0.02))["verdict"] == "not consistent"
    assert consistency(ev, Claim(id="c", kind="greater", book=0.0, other_value=0.5)) is None  # a direction
    assert consistency(Evidence(0.5, 0.5, 0.5, "single value"), Claim(id="c", kind="exact", book=0.5)) is None
    assert (
        consistency(Evidence(12.0, None, None, "", [12, None]), Claim(id="c", kind="range", book=12)) is None
    )


def test_one_runs_interval_adds_back_the_spread_that_averaging_nested_runs_removed():
    """A chain's value is the mean of its R GRPO seeds; one run like the book's is one start and
    one seed, so its spread is the chains' plus (1 - 1/R) of the within-chain variance."""
    reps = [[0.5, 0.7], [0.55, 0.75], [0.6, 0.8], [0.45, 0.65]]
    chains = [statistics.fmean(r) for r in reps]
    lo, hi = one_run_interval(chains, reps)
    s2, w2 = statistics.variance(chains), statistics.fmean([statistics.variance(r) for r in reps])
    half = t_quantile(3) * (s2 + w2 / 2 + s2 / 4) ** 0.5
    assert (lo, hi) == pytest.approx((statistics.fmean(chains) - half, statistics.fmean(chains) + half))
    assert hi - lo > one_run_interval(chains)[1] - one_run_interval(chains)[0]  # wider than chains alone
    assert one_run_interval(chains, reps, eval_sd=0.1)[1] > hi  # the book's own evaluation noise too


def test_a_paired_claim_is_decided_on_the_interval_of_the_paired_differences():
    # each chain's b is its a minus 0.1: the two own intervals overlap, their differences do not vary
    a, b = [0.4, 0.6, 0.8], [0.31, 0.5, 0.69]
    m = {"s.json": {"seeds": [0, 1, 2], "a": 0.6, "b": 0.5, "per_seed": {"a": a, "b": b}}}
    c = Claim(
        id="p", **BASE, kind="greater", book=0.0, metric=["s.json", "a"], other=["s.json", "b"], margin=0.05
    )
    row = judge(c, m)
    assert row.verdict == "reproduced" and row.tested.source == "3 chains, paired"
    assert row.evidence.lo < row.other.hi  # unpaired, the intervals would overlap
    record = verdict_record(row)
    assert record["decided_on"] == [row.tested.lo, row.tested.hi] == record["tested_interval"]
    assert "; ours − b = 0.1 [" in ours_text(row) and "(3 chains, paired)" in ours_text(row)
    unpaired = {"s.json": {**m["s.json"]}, "t.json": {"seeds": [5, 6, 7], "b": 0.5, "per_seed": {"b": b}}}
    other = judge(replace(c, other=("t.json", "b")), unpaired)
    assert other.verdict == "inconclusive"  # other seeds: the conservative interval of two intervals


def test_a_chain_without_a_value_never_decides_a_claim():
    crossing = {"kind": "range", "book": 12, "lo": 8, "hi": 16, "feasible": [1, 64]}
    assert decided([12, 12.1, None, 11.9], crossing).verdict == "inconclusive"  # the others agree
    assert decided([20, None, 22], crossing).verdict == "inconclusive"  # the others do not: still no
    assert decided([None, None, None], crossing).verdict == "inconclusive"  # no chain gives a value
    assert decided([12, None], crossing).consistency is None
    assert decide(Evidence(None, None, None, "undefined"), Claim(id="c", **crossing)) == "missing"
    assert "give no value" in reason(decided([20, None, 22], crossing))


def test_no_verdict_from_fewer_than_two_chains():
    """One chain (or one left once the censored chains are left out, in the sensitivity analysis) is
    never decided as a point, however far it lies from the band, and its value is that chain's."""
    for chains in ([7.0], [60.0]):
        row = decided(chains)
        assert row.verdict == "inconclusive" and row.tested.lo is None
        assert "Fewer than two chains" in reason(row)
    grpo = {"seeds": [0, 1, 2], "sft": "x", "k": 0.0, "per_seed": {"k": [60.0, 0.0, 0.0]}}
    row = judge(
        Claim(id="c", **BASE, **SEVEN, metric=["g.json", "k"]), {"g.json": grpo, **_start([1.0, 0.0, 0.0])}
    )
    assert row.evidence.value == 20.0 and row.evidence.seeds == [0, 1, 2]  # every chain counts
    aside = row.sensitivity
    assert aside.verdict == "inconclusive" and aside.evidence.value == 60.0 and aside.evidence.seeds == [0]


def test_differs_needs_the_books_value_outside_one_runs_prediction_interval():
    """Tight chains wholly outside the band differ; chains whose mean misses the band but spread
    enough that one run like the book's could have shown its value are inconclusive, and say so."""
    tight = decided([12, 12.1, 11.9, 12])
    assert tight.verdict == "differs" and not tight.tested.one_run[0] <= 7 <= tight.tested.one_run[1]
    loose = decided([9.4, 10.5, 12.0, 13.5, 9.6, 12.3, 10.1, 11.4])  # mean 11.1, interval above 9
    assert by_interval(loose.tested.lo, loose.tested.hi, loose.claim) == "differs"
    assert loose.tested.one_run[0] < 9  # ... but one run could land in the band
    if loose.tested.one_run[0] <= 7:
        assert loose.verdict == "inconclusive" and "could have shown the book's value" in reason(loose)
    directional = {"kind": "greater", "book": 0.0, "other_value": 0.0, "margin": 0.0}
    below = decided([-0.3, -0.31, -0.29, -0.3], directional)
    assert below.verdict == "differs"  # no run of ours would show the book's direction
    spread = decided([-0.2, -0.1, -0.15, -0.12, 0.05, -0.2, -0.18, -0.1], directional)
    assert by_interval(spread.tested.lo, spread.tested.hi, spread.claim) == "differs"
    assert spread.verdict == "inconclusive"  # one run could have come out above 0, as the book's did


def test_property_every_verdict_follows_the_rule():
    """Over random chain sets and claims: reproduced iff the interval is inside; differs only with
    the interval outside and the book's value outside one run's interval; never either on fewer
    than two chains."""
    rng = random.Random(20261203)
    seen = set()
    for _ in range(500):
        claim = _random_claim(rng)
        n = rng.randint(1, 9)
        center, sd = rng.uniform(-1, 1), rng.choice([0.01, 0.05, 0.2, 0.5])
        chains = [rng.gauss(center, sd) for _ in range(n)]
        row = decided(chains, claim)
        seen.add(row.verdict)
        if n < 2:
            assert row.verdict == "inconclusive"
            continue
        inside = by_interval(row.tested.lo, row.tested.hi, row.claim)
        assert (row.verdict == "reproduced") == (inside == "reproduced")
        if row.verdict == "differs":
            lo, hi = row.tested.one_run
            book = row.claim.book if row.claim.kind == "exact" else None
            assert inside == "differs"
            assert (not lo <= book <= hi) if book is not None else by_interval(lo, hi, row.claim) == "differs"
    assert seen == {"reproduced", "inconclusive", "differs"}


def test_a_claim_at_an_end_fewer_than_two_chains_reached_is_not_comparable():
    """The chapter's post-GRPO model was at pass@1 0.83: a claim measured at that controlled end
    over chains that never got there is not comparable (not inconclusive); where two or more did
    reach it, the chains that missed it count where they stopped (censored, named), and the claim
    judged without them is its sensitivity analysis."""
    end = lambda reached: {  # noqa: E731
        "grpo-e.json": {"seeds": [0, 1, 2], "sft": "x", "target": 0.83, "per_seed": {"end_reached": reached}}
    }
    passk = {
        "passk.json": {
            "sft_run": "x",
            "variants": {"e": {"seeds": [0, 1, 2], "n": 0.9, "per_seed": {"n": [0.98, 0.1, 0.97]}}},
        }
    }
    c = Claim(
        id="e",
        **BASE,
        kind="exact",
        book=0.977,
        tol=0.0133,
        metric=["passk.json", "variants.e.n"],
        endpoint="e",
    )
    far = judge(c, {**passk, **end([1.0, 0.0, 0.0])})
    assert far.verdict == "not comparable" and "1 of 3 chains reached e's controlled end" in reason(far)
    near = judge(c, {**passk, **end([1.0, 0.0, 1.0])})
    assert near.verdict != "not comparable" and near.evidence.seeds == [0, 1, 2]
    censored = "censored (counted where they stopped)"
    assert near.evidence.source == f"3 chains; {censored}, missed e's end by its cap: 1"
    assert near.sensitivity.evidence.seeds == [0, 2]
    assert near.sensitivity.evidence.source == "2 of 3 chains; left out, missed e's end by its cap: 1"
    assert verdict_record(near)["sensitivity"]["verdict"] == near.sensitivity.verdict
    assert judge(c, {**passk, **end([1.0, 1.0, 1.0])}).sensitivity is None  # nothing censored
    counts = summary_counts([far, near])
    assert counts["not comparable"] == 1


LOG_RANGE = {
    "kind": "range",
    "book": 0.25,
    "lo": 0.0,
    "hi": 0.5,
    "estimand": "log_mean",
    "feasible": [0, 1e9],
}  # a range on the log scale: the geometric-mean run


def test_a_skewed_metric_is_decided_on_its_geometric_mean_run_with_a_bca_check():
    """The mean of log values decides; where the BCa interval would decide otherwise the claim is
    inconclusive. A long upper tail that drags the arithmetic mean over a bound leaves the geometric
    mean under it."""
    below = LOG_RANGE
    tailed = [0.2, 0.25, 0.22, 0.3, 0.21, 0.24, 0.26, 0.23, 0.28, 0.2, 0.22, 0.25, 0.27, 0.3, 0.24, 2.5]
    row = decided(tailed, below)
    assert row.tested.value == pytest.approx(math.exp(statistics.fmean(math.log(v) for v in tailed)))
    assert row.tested.check is not None and row.tested.value < 0.5
    if by_interval(*row.tested.check, row.claim) != by_interval(row.tested.lo, row.tested.hi, row.claim):
        assert row.verdict == "inconclusive" and "BCa" in reason(row)
    tight = decided([0.2, 0.21, 0.19, 0.2, 0.22, 0.18], below)
    assert tight.verdict == "reproduced"
    with pytest.raises(ValueError, match="log_mean needs positive values"):
        from rlvr.report.evidence import _evidence

        _evidence(chains_file([0.2, 0.0, 0.3]), ["p.json", "k"], "log_mean")


def test_a_share_of_runs_has_its_exact_interval():
    assert share_interval(8, 8) == pytest.approx((0.6305, 1.0), abs=1e-4)  # (0.025)^(1/8)
    assert share_interval(0, 8) == pytest.approx((0.0, 0.3695), abs=1e-4)
    from scipy.stats import binomtest

    ci = binomtest(5, 8).proportion_ci(0.95, method="exact")
    assert share_interval(5, 8) == pytest.approx((ci.low, ci.high))
    most = {
        "kind": "greater",
        "book": 0.5,
        "other_value": 0.5,
        "margin": 0.0,
        "estimand": "share",
        "feasible": [0, 1],
    }
    assert decided([1.0] * 8, most).verdict == "reproduced"
    # 0 of 8: the share's interval [0, 0.37] lies below one half, but one run reaches with a chance
    # up to 0.37, above the 2.5% tail: one run like the book's could have reached, so not a difference
    none = decided([0.0] * 8, most)
    assert none.tested.one_run == (0.0, 1.0) and none.verdict == "inconclusive"
    assert decided([0.0] * 200, most).verdict == "differs"  # upper bound 0.018: one run would miss
    assert decided([1.0, 0.0, 1.0, 0.0], most).verdict == "inconclusive"


def test_the_report_record_carries_the_deciding_interval_and_consistency():
    row = decided([9, 9, 10, 9])
    record = verdict_record(row)
    assert "book_error" not in record and record["tested_interval"] is None  # not a paired claim
    assert record["decided_on"] == [row.tested.lo, row.tested.hi]
    assert record["consistency"] == row.consistency and record["consistency"]["verdict"] == "not consistent"
    assert verdict_record(decided([12, None]))["decided_on"] is None


@pytest.mark.parametrize(
    "variance, named",
    [
        (
            {"starts": 0.21, "grpo": 0.05, "evaluation": 0.01},
            "blocked by the spread of starts (SD 0.21 per chain)",
        ),
        ({"starts": 0.02, "grpo": 0.09}, "blocked by the spread of GRPO seeds (SD 0.09 per chain)"),
        ({"evaluation": 0.04}, "blocked by evaluation noise (SD 0.04 per chain)"),
    ],
)
def test_the_reason_names_the_largest_variance_component(variance, named):
    claim = {"kind": "exact", "book": 0.57, "tol": 0.2, "feasible": [0, 1]}
    row = decided([0.6, 0.7, 0.8, 0.7], claim, variance={"k": variance})
    assert row.verdict == "inconclusive" and row.evidence.variance == variance
    assert f"straddles the bound 0.77: {named};" in reason(row)


def test_variance_components_are_found_beside_a_nested_key_as_per_seed_is():
    m = {
        "passk.json": {
            "v": {
                "seeds": [0, 1, 2],
                "acc": 0.6,
                "per_seed": {"acc": [0.4, 0.6, 0.8]},
                "variance": {"acc": {"grpo": 0.1, "starts": 0.05}},
            }
        }
    }
    c = Claim(id="n", **BASE, kind="greater", book=0.5, other_value=0.5, metric=["passk.json", "v.acc"])
    row = judge(c, m)
    assert row.evidence.variance == {"grpo": 0.1, "starts": 0.05}
    assert "blocked by the spread of GRPO seeds (SD 0.1 per chain)" in reason(row)


def test_without_components_the_reason_falls_back_to_the_spread_between_chains():
    row = decided([6, 8, 10, 8], {"kind": "exact", "book": 7, "tol": 2})
    sd = statistics.stdev([6, 8, 10, 8])
    assert reason(row).startswith("Our interval [")
    assert f"blocked by the spread between chains (SD {num(sd)} per chain)" in reason(row)


def test_a_paired_claims_reason_is_about_the_paired_difference():
    m = {
        "s.json": {
            "seeds": [0, 1, 2],
            "a": 0.5,
            "b": 0.3,
            "per_seed": {"a": [0.4, 0.6, 0.5], "b": [0.3, 0.3, 0.31]},
        }
    }
    c = Claim(
        id="p", **BASE, kind="greater", book=0.0, metric=["s.json", "a"], other=["s.json", "b"], margin=0.2
    )
    row = judge(c, m)
    sd = statistics.stdev([0.1, 0.3, 0.19])
    assert row.verdict == "inconclusive"
    assert reason(row).startswith("Ours − b [") and "(3 chains, paired) straddles the bound 0.2" in reason(
        row
    )
    assert (
        f"blocked by the spread of the paired differences between chains (SD {num(sd)} per chain)"
        in reason(row)
    )


def test_precision_is_the_half_width_against_half_the_tolerance_and_the_chains_that_meet_it():
    chains = [0.50, 0.55, 0.60, 0.53]  # SD 0.042; band 0.56 +- 0.02: target half-width 0.01
    claim = {"kind": "exact", "book": 0.56, "tol": 0.02, "feasible": [0, 1]}
    row = decided(chains, claim)
    p = precision(row)
    assert p["target"] == 0.01 and p["half_width"] == pytest.approx((row.tested.hi - row.tested.lo) / 2)
    assert not p["powered"]
    sd = statistics.stdev(chains)
    half = lambda k: t_quantile(k - 1) * sd / k**0.5  # noqa: E731
    n = chains_needed(row.tested, row.claim)
    assert half(n) <= 0.01 < half(n - 1)  # the first such n
    assert f"about {n} chains would meet it at this spread (we ran 4)" in reason(row)
    assert precision(decided([0.3, 0.3, 0.3], claim))["powered"]  # no spread: a point, powered
    directional = {"kind": "greater", "book": 0.0, "other_value": 0.0, "margin": 0.0}
    assert precision(decided([0.1, 0.2, 0.3], directional)) is None  # no smallest effect declared
    assert precision(decided([0.1, 0.2, 0.3], {**directional, "sesoi": 0.05}))["target"] == 0.05
    assert MAX_CHAINS == 100_000


def test_the_rule_imports_nothing_from_the_pipeline():
    code = "import sys, rlvr.report.verdict; print([m for m in sys.modules if m.startswith('rlvr.pipeline')])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _start(reached):
    """sft-x.json of a controlled start over chains 0..n-1 (`reached`: 1.0 reached its target, 0.0
    its step cap came first)."""
    n = len(reached)
    return {"sft-x.json": {"seeds": list(range(n)), "per_seed": {"reached": list(reached), "acc": [0.5] * n}}}


def test_a_chain_whose_start_missed_its_target_counts_where_it_stopped_and_is_named():
    """GRPO from chain 2's start, which stayed on its plateau to the step cap, is a result: it counts
    in the interval (its wild 0.05 makes the claim inconclusive), the claim's line names it, and the
    claim without it (reproduced) is shown beside as the sensitivity analysis. Nothing is censored
    where every chain reached, or where the run has no target (no `reached`)."""
    grpo = {"seeds": [0, 1, 2, 3], "sft": "x", "k": 0.0, "per_seed": {"k": [6.9, 7.1, 0.05, 7.0]}}
    claim = Claim(id="c", **BASE, **SEVEN, metric=["g.json", "k"])
    row = judge(claim, {"g.json": grpo, **_start([1.0, 1.0, 0.0, 1.0])})
    assert row.evidence.per_seed == [6.9, 7.1, 0.05, 7.0] and row.verdict == "inconclusive"
    censored = "censored (counted where they stopped)"
    assert row.evidence.source == f"4 chains; {censored}, start missed its target: 2"
    assert "start missed its target: 2" in ours_text(row)
    aside = row.sensitivity
    assert aside.evidence.per_seed == [6.9, 7.1, 7.0] and aside.verdict == "reproduced"
    assert aside.evidence.source == "3 of 4 chains; left out, start missed its target: 2"
    every = judge(claim, {"g.json": grpo, **_start([1.0, 1.0, 1.0, 1.0])})
    assert every.evidence.source == "4 chains" and every.verdict == "inconclusive"
    budget = {"sft-x.json": {"seeds": [0, 1, 2, 3], "per_seed": {"acc": [0.5] * 4}}}
    assert judge(claim, {"g.json": grpo, **budget}).evidence.seeds == [0, 1, 2, 3]


def test_the_start_of_a_pass_at_k_key_is_the_start_its_model_trains_from():
    """passk.json's `sft.*` keys are the start it scores (`sft_run`), `variants.<v>.*` that
    variant's start (its metrics file's `sft`): both name the chain whose start missed, and the
    sensitivity analysis pairs the chains whose start reached."""
    from rlvr.report.evidence import missed_starts, start_run

    passk = {
        "sft_run": "x",
        "contrast_run": None,
        "sft": {"seeds": [0, 1, 2], "n": 0.9, "per_seed": {"n": [0.9, 0.2, 0.91]}},
        "variants": {"v": {"seeds": [0, 1, 2], "n": 0.9, "per_seed": {"n": [0.95, 0.3, 0.96]}}},
    }
    m = {"passk.json": passk, "grpo-v.json": {"sft": "x", "seeds": [0, 1, 2]}, **_start([1.0, 0.0, 1.0])}
    assert start_run(m, ["passk.json", "sft.n"]) == start_run(m, ["passk.json", "variants.v.n"]) == "x"
    assert start_run(m, ["passk.json", "contrast.n"]) is None and start_run(m, ["worked.json", "a"]) is None
    assert missed_starts(m, ["passk.json", "variants.v.n"]) == {1}
    c = Claim(
        id="p",
        **BASE,
        kind="greater",
        book=0.0,
        metric=["passk.json", "variants.v.n"],
        other=["passk.json", "sft.n"],
        margin=0.0,
    )
    row = judge(c, m)
    assert row.tested.per_seed == pytest.approx([0.05, 0.1, 0.05]) and row.tested.seeds == [0, 1, 2]
    censored = "censored (counted where they stopped)"
    assert row.tested.source == f"3 chains, paired; {censored}, start missed its target: 1"
    aside = row.sensitivity.tested
    assert aside.per_seed == pytest.approx([0.05, 0.05]) and aside.seeds == [0, 2]
    assert aside.source == "2 chains, paired; left out, start missed its target: 1"


def test_a_claim_on_the_log_scale_names_the_spread_of_the_logs():
    """The geometric-mean run's interval is built from log values: what blocks it is their spread,
    not the raw values' SD (which the variance components hold)."""
    claim = LOG_RANGE
    values = [0.3, 0.9, 0.4, 0.7, 0.5, 0.35]
    row = decided(values, claim, variance={"k": {"starts": 0.21}})
    sd = statistics.stdev(math.log(v) for v in values)
    assert row.verdict == "inconclusive"
    assert f"SD {sd:.4g} of the log per chain, a factor of {math.exp(sd):.2g})" in reason(row)
