"""The verdict rule (rlvr.report.verdict): an equivalence test on the deciding interval, the book's
consistency with one more chain shown beside it and never counted, and the reason an undecided
claim gives."""

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
from rlvr.report.verdict import MAX_CHAINS, Evidence, chains_to_decide, consistency, decide, num, reason
from rlvr.stats import t_quantile

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


def test_consistency_is_the_prediction_interval_for_one_new_chain_cut_to_feasible():
    chains = [0.50, 0.55, 0.60, 0.53]
    ev = Evidence(statistics.fmean(chains), 0.0, 1.0, "4 chains", chains)
    c = consistency(ev, Claim(id="c", kind="exact", book=0.56, tol=0.02))
    half = 3.182446305284263 * statistics.stdev(chains) * (1 + 1 / 4) ** 0.5  # t(0.975, 3) s sqrt(1 + 1/n)
    assert c["verdict"] == "consistent"
    assert c["interval"] == pytest.approx([statistics.fmean(chains) - half, statistics.fmean(chains) + half])
    assert consistency(ev, Claim(id="c", kind="exact", book=0.83, tol=0.02))["verdict"] == "not consistent"
    assert consistency(ev, Claim(id="c", kind="exact", book=0.56, tol=0.02), [0.5, 0.6])["interval"] == [
        0.5,
        0.6,
    ]
    assert consistency(ev, Claim(id="c", kind="greater", book=0.0, other_value=0.5)) is None  # a direction
    assert consistency(Evidence(0.5, 0.5, 0.5, "single value"), Claim(id="c", kind="exact", book=0.5)) is None
    assert (
        consistency(Evidence(12.0, None, None, "", [12, None]), Claim(id="c", kind="range", book=12)) is None
    )


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


def test_undefined_chains_are_never_reproduced():
    crossing = {"kind": "range", "book": 12, "lo": 8, "hi": 16, "feasible": [1, 64]}
    assert decided([12, 12.1, None, 11.9], crossing).verdict == "inconclusive"  # the others agree
    assert decided([20, None, 22], crossing).verdict == "differs"  # the others do not
    assert decided([None, None, None], crossing).verdict == "differs"  # no chain gives a value
    assert decided([12, None], crossing).consistency is None
    assert decide(Evidence(None, None, None, "undefined"), Claim(id="c", **crossing)) == "missing"


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


def test_an_exact_claim_finer_than_one_runs_spread_says_a_single_run_cannot_be_pinned():
    chains = [0.50, 0.55, 0.60, 0.53]  # SD 0.042: one run is uncertain to +-0.082, tolerance 0.02
    row = decided(chains, {"kind": "exact", "book": 0.56, "tol": 0.02, "feasible": [0, 1]})
    assert row.verdict == "inconclusive" and row.consistency["verdict"] == "consistent"
    error = num(1.96 * statistics.stdev(chains))
    assert (
        f"; a single book run cannot be pinned closer than ±{error} (1.96 × the SD of our chains)"
        in reason(row)
    )
    wide = decided([0.3, 0.5, 0.7], {"kind": "exact", "book": 0.2, "tol": 0.5})  # 1.96 SD = 0.39 < 0.5
    assert wide.verdict == "inconclusive" and "single book run" not in reason(wide)


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


def test_chains_to_decide_is_the_first_count_whose_interval_clears_the_nearest_bound():
    chains = [0.50, 0.55, 0.60, 0.53]  # mean 0.545, SD 0.0420; band 0.56 +- 0.02: nearest bound 0.54
    claim = {"kind": "exact", "book": 0.56, "tol": 0.02}
    n = chains_to_decide(chains, Claim(id="c", **claim))
    mean, sd = statistics.fmean(chains), statistics.stdev(chains)
    half = lambda k: t_quantile(k - 1) * sd / k**0.5  # noqa: E731
    assert half(n) < mean - 0.54 <= half(n - 1)  # the first n, and no earlier one
    assert n == 274
    row = decided(chains, {**claim, "feasible": [0, 1]})
    assert reason(row).endswith(f"; at this mean and spread about {n} chains would decide it (we ran 4)")


def test_chains_to_decide_gives_up_on_a_mean_on_the_bound_and_needs_a_spread():
    on_bound = [0.52, 0.50, 0.54]  # mean 0.52: the bound of 0.57 +- 0.05 itself
    claim = {"kind": "exact", "book": 0.57, "tol": 0.05}
    assert chains_to_decide(on_bound, Claim(id="c", **claim)) == MAX_CHAINS + 1
    assert "more than 100,000 chains would be needed" in reason(decided(on_bound, claim))
    assert (
        chains_to_decide([0.3, 0.3, 0.3], Claim(id="c", **claim)) is None
    )  # no spread: the interval is a point
    one_sided = {"kind": "greater", "other_value": 0.0, "margin": 0.0}  # only the bound 0 is finite
    assert chains_to_decide([-0.1, 0.3, 0.4], Claim(id="c", **one_sided)) == chains_to_decide(
        [0.1, 0.5, 0.6], Claim(id="c", **{**one_sided, "other_value": 0.2})
    )


def test_the_rule_imports_nothing_from_the_pipeline():
    code = "import sys, rlvr.report.verdict; print([m for m in sys.modules if m.startswith('rlvr.pipeline')])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _start(reached):
    """sft-x.json of a controlled start over chains 0..n-1 (`reached`: 1.0 reached its target, 0.0
    its step cap came first)."""
    n = len(reached)
    return {"sft-x.json": {"seeds": list(range(n)), "per_seed": {"reached": list(reached), "acc": [0.5] * n}}}


def test_a_chain_whose_start_missed_its_target_is_left_out_of_claims_from_that_start_and_named():
    """GRPO from chain 2's start, which stayed on its plateau to the step cap, is not GRPO from the
    chapter's start: its value is left out of the interval (a wild 0.05 would have made the claim
    inconclusive) and the claim's line says which chain and why. Nothing is left out where every
    chain reached, or where the run has no target (no `reached`)."""
    grpo = {"seeds": [0, 1, 2, 3], "sft": "x", "k": 0.0, "per_seed": {"k": [6.9, 7.1, 0.05, 7.0]}}
    claim = Claim(id="c", **BASE, **SEVEN, metric=["g.json", "k"])
    row = judge(claim, {"g.json": grpo, **_start([1.0, 1.0, 0.0, 1.0])})
    assert row.evidence.per_seed == [6.9, 7.1, 7.0] and row.evidence.seeds == [0, 1, 3]
    assert row.verdict == "reproduced"
    assert row.evidence.source == "3 of 4 chains; left out, start missed its target: 2"
    assert "left out, start missed its target: 2" in ours_text(row)
    every = judge(claim, {"g.json": grpo, **_start([1.0, 1.0, 1.0, 1.0])})
    assert every.evidence.source == "4 chains" and every.verdict == "inconclusive"
    budget = {"sft-x.json": {"seeds": [0, 1, 2, 3], "per_seed": {"acc": [0.5] * 4}}}
    assert judge(claim, {"g.json": grpo, **budget}).evidence.seeds == [0, 1, 2, 3]


def test_the_start_of_a_pass_at_k_key_is_the_start_its_model_trains_from():
    """passk.json's `sft.*` keys are the start it scores (`sft_run`), `variants.<v>.*` that
    variant's start (its metrics file's `sft`): both are cut to the chains whose start reached."""
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
    assert row.tested.per_seed == pytest.approx([0.05, 0.05]) and row.tested.seeds == [0, 2]
    assert row.tested.source == "2 chains, paired; left out, start missed its target: 1"
