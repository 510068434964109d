"""The Student-t helpers equal scipy.stats' own, bit for bit, without importing scipy.stats."""

import subprocess
import sys

import pytest
from scipy import stats

from rlvr.stats import mean_ci, t_quantile, t_two_sided_p


@pytest.mark.parametrize("df", [1, 2, 3, 7, 2.5, 11.3])
def test_t_quantile_and_p_value_are_scipy_stats_exactly(df):
    assert t_quantile(df) == float(stats.t.ppf(0.975, df))
    assert t_quantile(df, 0.9) == float(stats.t.ppf(0.9, df))
    for t in (0.0, 0.7, -2.1, 6.0):
        assert t_two_sided_p(t, df) == float(2 * stats.t.sf(abs(t), df))


def test_mean_ci_is_the_student_t_interval():
    mean, lo, hi = mean_ci([0.2, 0.4, 0.9])
    half = stats.t.ppf(0.975, 2) * stats.tstd([0.2, 0.4, 0.9]) / 3**0.5
    assert mean == pytest.approx(0.5) and lo == pytest.approx(0.5 - half) and hi == pytest.approx(0.5 + half)
    assert mean_ci([0.3]) == (0.3, None, None)


def test_a_seed_summary_does_not_import_scipy_stats():
    code = "import sys; from rlvr.stats import seed_metrics; seed_metrics({0: {'a': 1.0}, 1: {'a': 2.0}}); "
    code += "print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_kaplan_meier_counts_a_censored_run_until_it_stops():
    """Four runs reach the event after 10, 20, 40 and 50 steps; one is censored at 30 (the cap came
    first). Closed form: S = 4/5 after 10, 3/5 after 20, unchanged at 30 (a censored run is no
    event), then 2 at risk at 40: 3/5 x 1/2 = 3/10 (the median: the first step where S <= 1/2), 0
    after 50. A mean over the runs that got there would ignore the censored one; the curve does not."""
    from rlvr.stats import survival

    km = survival([10, 20, 30, 40, 50], [True, True, False, True, True])
    assert km["steps"] == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert km["still_short"] == pytest.approx([0.8, 0.6, 0.6, 0.3, 0.0])
    assert km["median"] == 40.0 and km["censored"] == [30.0] and km["runs"] == 5
    lo, hi = km["band"]
    assert all(a <= p <= b for a, p, b in zip(lo, km["still_short"], hi))
    low, high = km["median_ci"]
    assert low is not None and low <= 40.0 and (high is None or high >= 40.0)
    most_censored = survival([100, 800, 800], [True, False, False])
    assert most_censored["median"] is None  # the curve never falls to one half: "not reached"
    with pytest.raises(ValueError, match="2 step counts for 3 runs"):
        survival([1, 2], [True, True, False])


def test_a_step_cap_is_refused_without_two_positive_step_counts():
    from rlvr.stats import step_cap

    assert step_cap([100, 100, 100], 0.05) == 100  # no spread: the bound is the common value
    with pytest.raises(ValueError, match="two or more positive"):
        step_cap([100], 0.05)
    with pytest.raises(ValueError, match="two or more positive"):
        step_cap([100, 0], 0.05)
