"""engine.analysis.stats against cases worked out by hand (t quantiles from printed tables)."""

import math

import pytest

from engine.analysis import stats

# scipy.stats (about 0.9 CPU-s to import, in each worker that does): with the torch tests, in one worker
pytestmark = pytest.mark.xdist_group("torch")

T_975_DF4 = 2.776445  # Student t, 97.5th percentile, 4 degrees of freedom (any printed table)
T_975_DF2 = 4.302653


def test_modified_z_scores_flag_the_one_far_value():
    # median 10, |deviations| 0, .1, .1, 0, 20 -> MAD 0.1; M(30) = 0.6745 * 20 / 0.1 = 134.9
    z = stats.modified_z_scores([10.0, 10.1, 9.9, 10.0, 30.0])
    assert z[4] == pytest.approx(134.9)
    assert z[1] == pytest.approx(0.6745)
    assert z[2] == pytest.approx(-0.6745)
    assert z[0] == 0.0


def test_remove_outliers_uses_3_5_as_the_limit():
    kept, removed = stats.remove_outliers([10.0, 10.1, 9.9, 10.0, 30.0])
    assert kept == [10.0, 10.1, 9.9, 10.0]
    assert removed == 1
    # M = 0.6745 * 0.5 / 0.1 = 3.37 stays; 0.6745 * 0.6 / 0.1 = 4.05 goes
    assert stats.remove_outliers([10.0, 10.1, 9.9, 10.0, 10.5]) == ([10.0, 10.1, 9.9, 10.0, 10.5], 0)
    assert stats.remove_outliers([10.0, 10.1, 9.9, 10.0, 10.6])[1] == 1


def test_zero_mad_falls_back_to_mean_absolute_deviation():
    # median 5; |dev| = 0,0,0,0,4 -> MAD 0; MeanAD 0.8; M(9) = 4 / (1.253314 * 0.8) = 3.99
    z = stats.modified_z_scores([5.0, 5.0, 5.0, 5.0, 9.0])
    assert z[4] == pytest.approx(4 / (1.253314 * 0.8))
    assert stats.remove_outliers([5.0, 5.0, 5.0, 5.0, 9.0]) == ([5.0] * 4, 1)
    assert stats.modified_z_scores([2.0, 2.0, 2.0]) == [0.0, 0.0, 0.0]


def test_mean_ci_by_t_distribution():
    # mean 3, s = sqrt(2.5), sem = s / sqrt(5) = 0.707107; half-width = 2.776445 * 0.707107
    mean, low, high = stats.mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert mean == 3.0
    half = T_975_DF4 * math.sqrt(2.5) / math.sqrt(5)
    assert low == pytest.approx(3.0 - half, abs=1e-5)
    assert high == pytest.approx(3.0 + half, abs=1e-5)
    # three values 10, 12, 14: s = 2, half = 4.302653 * 2 / sqrt(3) = 4.968
    _, low, high = stats.mean_ci([10.0, 12.0, 14.0])
    assert (high - low) / 2 == pytest.approx(T_975_DF2 * 2 / math.sqrt(3), abs=1e-5)


def test_mean_ci_of_one_value_has_no_bounds():
    assert stats.mean_ci([7.0]) == (7.0, None, None)
    with pytest.raises(ValueError):
        stats.mean_ci([])


def test_summarize_removes_outliers_before_the_interval():
    s = stats.summarize([10.0, 10.1, 9.9, 10.0, 30.0])
    assert s.n == 4 and s.n_outliers == 1
    assert s.mean == pytest.approx(10.0)
    # s of 10, 10.1, 9.9, 10 = sqrt(0.02 / 3) = 0.08165
    assert s.std == pytest.approx(math.sqrt(0.02 / 3))
    assert s.ci_low < 10.0 < s.ci_high


def test_welch_t_test_hand_computed():
    # a: mean 3, var 2.5; b: mean 6, var 10; se = sqrt(2.5/5 + 10/5) = sqrt(2.5)
    # t = -3 / 1.581139 = -1.897367; df = 2.5^2 / (0.5^2/4 + 2^2/4) = 5.882353
    # p = 2 P(T_5.88 > 1.897367) = 0.107531 (by numerical integration of the t density)
    r = stats.welch_t_test([1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 4.0, 6.0, 8.0, 10.0])
    assert r.t == pytest.approx(-1.897367, abs=1e-6)
    assert r.df == pytest.approx(5.882353, abs=1e-6)
    assert r.p_value == pytest.approx(0.107531, abs=1e-6)
    assert stats.is_significant(r.p_value) is False


def test_welch_significant_difference_and_summaries_agree():
    a, b = [100.0, 101.0, 99.0, 100.5, 99.5], [150.0, 151.0, 149.0, 150.5, 149.5]
    r = stats.welch_t_test(a, b)
    assert r.p_value < 1e-6 and stats.is_significant(r.p_value) is True
    r2 = stats.welch_from_summaries(stats.summarize(a), stats.summarize(b))
    assert r2.p_value == pytest.approx(r.p_value, rel=1e-9)
    assert r2.t == pytest.approx(r.t)


def test_welch_undefined_cases():
    assert stats.welch_t_test([1.0], [1.0, 2.0]) is None
    assert stats.welch_t_test([3.0, 3.0], [3.0, 3.0]) is None
    assert stats.is_significant(None) is None
