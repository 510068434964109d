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
