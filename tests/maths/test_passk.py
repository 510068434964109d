import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from rlvr.passk import (
    bootstrap_band,
    compare,
    crossings_text,
    crossover_k,
    first_crossing,
    never_solved,
    one_sided_problems,
    paired_test,
    pass_at_k,
    pass_at_k_curve,
    solved_by_one_only,
    two_problem_toy,
)
from rlvr.passk_summary import summarise_counts


def exact_pass_at_k(c: int, n: int, k: int) -> Fraction:
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def random_counts(n=16, problems=40, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n + 1, size=problems)


def test_estimator_equals_enumeration_over_all_k_subsets():
    for n in range(1, 9):
        for c in range(n + 1):
            outcomes = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(outcomes, k))
                brute = Fraction(sum(any(s) for s in subsets), len(subsets))
                assert abs(pass_at_k([c], n, k)[0] - brute) < 1e-12, (n, c, k)


def test_never_correct_gives_exactly_zero():
    for n in (1, 5, 64, 500):
        for k in (1, n // 2 + 1, n):
            assert pass_at_k([0, 0], n, k).tolist() == [0.0, 0.0]


def test_fewer_wrong_than_k_gives_exactly_one():
    n = 12
    for k in range(1, n + 1):
        c = np.arange(n - k + 1, n + 1)  # every c with n - c < k
        assert np.all(pass_at_k(c, n, k) == 1.0)


def test_pass_at_k_is_non_decreasing_in_k_for_every_problem():
    n = 32
    c = np.arange(n + 1)
    table = np.stack([pass_at_k(c, n, k) for k in range(1, n + 1)], axis=1)  # (P, K)
    assert np.all(np.diff(table, axis=1) >= 0)
    _, mean = pass_at_k_curve(random_counts(n), n)
    assert np.all(np.diff(mean) >= 0)


def test_pass_at_1_is_accuracy():
    for n in (1, 7, 64, 300):
        c = np.arange(n + 1)
        np.testing.assert_allclose(pass_at_k(c, n, 1), c / n, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "c, n, k, message",
    [
        ([1, 2], 8, 9, "k = 9"),
        ([1, 2], 8, 0, "k = 0"),
        ([1, 9], 8, 2, "c = 9"),
        ([-1, 2], 8, 2, "c = -1"),
        ([1, 2], 0, 1, "n = 0"),
    ],
)
def test_invalid_arguments_raise_naming_the_value(c, n, k, message):
    with pytest.raises(ValueError, match=message):
        pass_at_k(c, n, k)


def test_matches_exact_integer_arithmetic_at_n_64():
    n = 64
    c = np.arange(n + 1)
    for k in range(1, n + 1):
        got = pass_at_k(c, n, k)
        assert np.all(np.isfinite(got))
        exact = np.array([float(exact_pass_at_k(ci, n, k)) for ci in range(n + 1)])
        np.testing.assert_allclose(got, exact, rtol=0, atol=1e-12)


def test_finite_where_float_binomials_overflow():
    n = 2000  # C(2000, 1000) is far beyond float range
    c = np.array([1, 10, 1000, 1990])
    got = pass_at_k(c, n, 1000)
    assert np.all(np.isfinite(got))
    exact = [float(exact_pass_at_k(ci, n, 1000)) for ci in c]
    np.testing.assert_allclose(got, exact, rtol=0, atol=1e-12)


def test_curve_is_mean_over_problems_at_each_k():
    c, n = np.array([0, 3, 8]), 8
    ks, mean = pass_at_k_curve(c, n, ks=[1, 4, 8])
    assert ks.tolist() == [1, 4, 8]
    np.testing.assert_allclose(mean, [pass_at_k(c, n, k).mean() for k in (1, 4, 8)], atol=1e-15)
    ks_all, _ = pass_at_k_curve(c, n)
    assert ks_all.tolist() == list(range(1, n + 1))


def test_bootstrap_band_contains_point_estimate_and_is_seeded():
    n = 16
    c = random_counts(n, problems=60, seed=1)
    ks = [1, 2, 4, 8, 16]
    lo, hi = bootstrap_band(c, n, ks, resamples=500, seed=3)
    _, point = pass_at_k_curve(c, n, ks)
    assert np.all(lo <= point) and np.all(point <= hi) and np.all(lo < hi)
    lo2, hi2 = bootstrap_band(c, n, ks, resamples=500, seed=3)
    assert np.array_equal(lo, lo2) and np.array_equal(hi, hi2)
    lo3, _ = bootstrap_band(c, n, ks, resamples=500, seed=4)
    assert not np.array_equal(lo, lo3)


def test_bootstrap_band_is_scipys_percentile_bootstrap_without_its_memory():
    """The band is `scipy.stats.bootstrap`'s percentile interval of the mean over problems, from
    the same seed (both draw the same problem indices); only the way the means are summed differs."""
    from scipy.stats import bootstrap

    n, ks = 16, [1, 2, 4, 8, 16]
    c = random_counts(n, problems=80, seed=5)
    lo, hi = bootstrap_band(c, n, ks, resamples=300, seed=7, level=0.9)
    table = np.stack([pass_at_k(c, n, k) for k in ks], axis=1)  # (P, K)
    res = bootstrap(
        (table,),
        np.mean,
        axis=0,
        vectorized=True,
        n_resamples=300,
        method="percentile",
        confidence_level=0.9,
        random_state=np.random.default_rng(7),
    )
    assert np.allclose(lo, res.confidence_interval.low, rtol=0, atol=1e-12)
    assert np.allclose(hi, res.confidence_interval.high, rtol=0, atol=1e-12)


def test_bootstrap_band_narrows_as_level_falls():
    c, n = random_counts(8, problems=50, seed=2), 8
    lo95, hi95 = bootstrap_band(c, n, [1, 8], resamples=400, seed=0, level=0.95)
    lo50, hi50 = bootstrap_band(c, n, [1, 8], resamples=400, seed=0, level=0.5)
    assert np.all(lo95 <= lo50) and np.all(hi50 <= hi95)


def test_crossover_is_first_k_where_rl_falls_strictly_below():
    n = 8
    c_base = np.array([2, 2, 2, 2])  # rarely right, but on every problem
    c_rl = np.array([8, 8, 8, 0])  # always right on three, never on the fourth
    ks, base = pass_at_k_curve(c_base, n)
    _, rl = pass_at_k_curve(c_rl, n)
    assert rl[0] > base[0]
    brute = min(k for k, b, r in zip(ks, base, rl) if r < b)
    assert crossover_k(c_base, c_rl, n) == brute == 4  # 1 - C(6,4)/C(8,4) = 11/14 > 3/4


def test_a_tie_is_no_crossing():
    n = 8
    # Both models solve both problems for sure from k = 7 (base) and k = 3 (rl): level from k = 7 on,
    # rl never below. Under "base >= rl" this would cross at 7.
    ks, base = pass_at_k_curve([2, 2], n)
    _, rl = pass_at_k_curve([6, 6], n)
    assert base[6] == rl[6] == 1.0 and (rl >= base).all()
    assert crossover_k([2, 2], [6, 6], n) is None
    assert first_crossing([1, 2, 4], [0.5, 0.9, 1.0], [0.8, 0.9, 1.0]) is None  # level at 2 and 4
    assert first_crossing([1, 2, 4], [0.5, 0.9, 1.0], [0.8, 0.89, 1.0]) == 2


def test_crossings_text_names_every_chain():
    assert crossings_text([16, None, 62]) == "16, none, 62"


def test_crossover_is_none_when_rl_stays_ahead_or_never_leads():
    n = 8
    assert crossover_k([0, 2], [1, 4], n) is None  # rl solves a problem base never does
    assert crossover_k([4, 4], [2, 2], n) is None  # rl is not ahead at k = 1


def test_never_solved_counts_zero_rows():
    assert never_solved([0, 3, 0, 1]) == 2
    assert never_solved([1, 1]) == 0


def test_solved_by_one_only_counts_each_side():
    c_a = [0, 1, 2, 0, 5]
    c_b = [1, 0, 3, 0, 0]
    assert solved_by_one_only(c_a, c_b) == (2, 1)
    assert solved_by_one_only(c_b, c_a) == (1, 2)


def test_paired_test_on_identical_inputs_has_pvalue_one():
    c = random_counts(8, problems=20)
    for k in (1, 8):
        res = paired_test(c, c, 8, k)
        assert res["pvalue"] == 1.0 and res["mean_diff_a_minus_b"] == 0.0


def test_paired_test_on_clearly_different_inputs_has_small_pvalue():
    n = 16
    c_b = np.arange(30) % 8  # 0..7
    c_a = c_b + 1 + np.arange(30) % 9  # better on every problem, by varying margins
    res = paired_test(c_a, c_b, n, 1)
    assert res["pvalue"] < 1e-4
    assert res["mean_diff_a_minus_b"] == pytest.approx((c_a - c_b).mean() / n, abs=1e-12)


def test_paired_test_needs_the_same_problems():
    with pytest.raises(ValueError, match="same"):
        paired_test([1, 2], [1, 2, 3], 4, 1)


def test_compare_reports_the_whole_picture():
    n = 8
    c_base = np.array([2, 2, 2, 2, 0, 1])
    c_rl = np.array([8, 8, 8, 0, 0, 0])
    out = compare(c_base, c_rl, n, ks=[2, 4], resamples=200, seed=0)
    assert out["ks"] == [1, 2, 4, 8]
    assert out["pass_at_1_base"] == pytest.approx(9 / 48, abs=1e-12)
    assert out["pass_at_1_rl"] == pytest.approx(24 / 48, abs=1e-12)
    assert out["pass_at_n_base"] == pytest.approx(5 / 6, abs=1e-12)
    assert out["pass_at_n_rl"] == pytest.approx(3 / 6, abs=1e-12)
    for key in ("pass_at_1_base", "pass_at_1_rl", "pass_at_n_base", "pass_at_n_rl"):
        lo, hi = out[f"{key}_ci"]
        assert lo <= out[key] <= hi
    assert out["never_solved_base"] == 1 and out["never_solved_rl"] == 3
    assert (out["solved_by_base_only"], out["solved_by_rl_only"]) == (2, 0)
    assert out["crossover_k"] == crossover_k(c_base, c_rl, n)
    assert out["pass_at_1_diff_rl_minus_base"] == pytest.approx(15 / 48, abs=1e-12)
    assert 0.0 <= out["wilcoxon_pvalue_at_1"] <= 1.0 and 0.0 <= out["wilcoxon_pvalue_at_n"] <= 1.0
    assert compare(c_base, c_rl, n, ks=[2, 4], resamples=200, seed=0) == out


def test_two_problem_toy_raises_pass_at_1_and_lowers_pass_at_64():
    toy = two_problem_toy()
    assert toy["ks"][0] == 1 and toy["ks"][-1] == 64
    assert toy["pass_at_k_base"][0] == pytest.approx(0.325, abs=1e-15)
    assert toy["pass_at_k_rl"][0] == pytest.approx(0.495, abs=1e-15)
    assert toy["pass_at_k_base"][-1] == pytest.approx((1 + 1 - 0.95**64) / 2, abs=1e-15)
    assert toy["pass_at_k_rl"][-1] == pytest.approx((1 + 1 - 0.99**64) / 2, abs=1e-15)
    assert toy["pass_at_k_base"][-1] > toy["pass_at_k_rl"][-1]


def test_two_problem_toy_crossing_is_where_the_curves_cross():
    toy = two_problem_toy()
    base, rl = toy["pass_at_k_base"], toy["pass_at_k_rl"]
    brute = min(k for k in range(1, 65) if (2 - 0.4**k - 0.95**k) / 2 > (2 - 0.02**k - 0.99**k) / 2)
    assert toy["crossover_k"] == brute
    i = brute - 1
    assert rl[i - 1] >= base[i - 1] and base[i] > rl[i]


def test_two_problem_toy_rejects_a_non_probability():
    with pytest.raises(ValueError, match="p_b_rl = 1.5"):
        two_problem_toy(p_b_rl=1.5)


def _chains(sft: list, variant: list, n: int = 8) -> tuple[dict, dict]:
    """counts and chains for SFT chains `sft` and variant "v" seeds `variant` (lists of (P,) counts)."""
    counts = {
        **{f"sft/seed{s}": c for s, c in enumerate(sft)},
        **{f"v/seed{s}": c for s, c in enumerate(variant)},
    }
    return counts, {"sft": list(range(len(sft))), "v": list(range(len(variant)))}


def test_each_variant_seed_is_compared_with_its_own_chains_sft():
    n = 8
    sft = [[4, 4, 0, 0], [0, 0, 4, 4]]  # chain 0 solves problems 0-1, chain 1 problems 2-3
    counts, chains = _chains(sft, [[4, 4, 0, 0], [4, 4, 0, 0]], n)  # both seeds solve problems 0-1
    metrics, curves = summarise_counts(counts, chains, n, [1, n], 10, 0)
    v = metrics["variants"]["v"]
    assert v["seeds"] == [0, 1]
    assert v["per_seed"]["solved_by_base_only"] == [0, 2] and v["per_seed"]["solved_by_rl_only"] == [0, 2]
    assert curves["v"][0]["minus_sft"] == pytest.approx(0.0)  # same pass@1 as each chain's SFT
    assert metrics["sft"]["per_seed"]["pass_at_1"] == [0.25, 0.25] and metrics["sft"]["seeds"] == [0, 1]


def test_sft_interval_is_over_chains_and_widens_when_their_starts_differ():
    n = 8
    same, _ = summarise_counts(*_chains([[4, 2, 0, 8]] * 3, [[4, 2, 0, 8]]), n, [1, n], 10, 0)
    spread, curves = summarise_counts(
        *_chains([[2, 0, 0, 8], [4, 2, 0, 8], [6, 4, 0, 8]], [[4, 2, 0, 8]]), n, [1, n], 10, 0
    )
    assert same["sft"]["pass_at_1"] == pytest.approx(spread["sft"]["pass_at_1"])  # same mean over chains
    lo, hi = same["sft"]["ci95"]["pass_at_1"]
    assert lo == pytest.approx(hi) == pytest.approx(same["sft"]["pass_at_1"])  # identical chains: zero width
    lo2, hi2 = spread["sft"]["ci95"]["pass_at_1"]
    assert lo2 < spread["sft"]["pass_at_1"] < hi2 and hi2 - lo2 > 0.1
    assert curves["sft"][0]["ci95_hi"] - curves["sft"][0]["ci95_lo"] == pytest.approx(hi2 - lo2)
    one, _ = summarise_counts(*_chains([[4, 2, 0, 8]], [[4, 2, 0, 8]]), n, [1, n], 10, 0)
    assert one["sft"]["ci95"]["pass_at_1"] == [None, None]  # one chain: no interval


def test_contrast_is_summarised_over_its_own_chains():
    n = 8
    counts, chains = _chains([[4, 2, 0, 8], [4, 2, 0, 8]], [[4, 2, 0, 8]])
    counts.update({"other/seed0": [0, 0, 0, 8], "other/seed1": [8, 0, 0, 8]})
    metrics, curves = summarise_counts(
        counts, {**chains, "other": [0, 1]}, n, [1, n], 10, 0, contrast="other"
    )
    assert metrics["contrast"]["run"] == "other" and metrics["contrast"]["never_solved"] == 2.5
    assert metrics["contrast"]["per_seed"]["never_solved"] == [3, 2] and set(metrics["variants"]) == {"v"}
    assert set(curves) == {"sft", "other", "v"}


def test_a_variant_seed_without_its_sft_chain_is_refused_by_name():
    counts, chains = _chains([[4, 2, 0, 8]], [[4, 2, 0, 8], [1, 2, 3, 4]])
    with pytest.raises(ValueError, match="sft/seed1"):
        summarise_counts(counts, chains, 8, [1, 8], 10, 0)
    counts["sft/seed1"] = [1, 1, 1, 1]  # counts present, but the chain is not declared
    with pytest.raises(ValueError, match="sft/seed1"):
        summarise_counts(counts, chains, 8, [1, 8], 10, 0)


def test_one_sided_problems_take_every_sft_chain():
    sides = one_sided_problems([[1, 0, 0], [0, 0, 0]], [[0, 0, 2], [0, 0, 0]], ["a", "b", "c"])
    assert sides == {
        "sft_only": [{"prompt": "a", "c_sft": [1, 0], "c_seeds": [0, 0]}],
        "rl_only": [{"prompt": "c", "c_sft": [0, 0], "c_seeds": [2, 0]}],
    }
