"""Predict, then check: the fit, the choice of law and the interval, on synthetic points whose
truth is known (engine/analysis/scaling_forecast.py)."""

import pytest

from engine.analysis.scaling_forecast import (
    AMDAHL,
    LINEAR,
    SCALE_OUT,
    SCALE_UP,
    USL,
    ArmConfig,
    Point,
    arm_lines,
    choose,
    fit,
    forecast_arm,
)


def usl(n, lam=100.0, sigma=0.05, kappa=0.02):
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def points(rates, spread=0.01):
    """{units: rate} -> points named as scale-up configs, each with ``spread`` of its rate as sd."""
    return [Point(f"{n}x", n, x, None if spread is None else spread * x) for n, x in rates.items()]


def test_the_usl_fit_recovers_sigma_and_kappa():
    pts = points({n: usl(n) for n in (1, 2, 3, 4, 6, 8)})
    f = fit(pts, USL)
    assert (f.lam, f.sigma, f.kappa) == (pytest.approx(100.0), pytest.approx(0.05), pytest.approx(0.02))
    assert f.rate(16) == pytest.approx(usl(16))
    choice = choose(pts)
    assert choice.fit.law == USL and "least leave-one-out error" in choice.why
    # retrograde: past its peak the USL predicts less, which Amdahl never can
    assert choice.fit.rate(16) < choice.fit.rate(8)


def test_the_usl_fit_on_noisy_points_stays_near_the_truth_and_its_interval_holds_it():
    noise = {1: 1.004, 2: 0.995, 3: 1.003, 4: 0.997, 6: 1.002, 8: 0.996}
    pts = points({n: usl(n) * noise[n] for n in noise}, spread=0.005)
    choice = choose(pts)
    assert choice.fit.law == USL
    assert choice.fit.sigma == pytest.approx(0.05, abs=0.01) and choice.fit.kappa == pytest.approx(0.02, abs=0.003)
    low, high = choice.fit.interval(12)
    assert low < usl(12) < high


def test_amdahl_data_picks_amdahl_and_recovers_sigma():
    pts = points({n: usl(n, kappa=0.0, sigma=0.1) for n in (1, 2, 4)})
    choice = choose(pts)
    assert choice.fit.law == AMDAHL and choice.fit.sigma == pytest.approx(0.1)
    assert "the USL needs 4 unit counts" in choice.why  # with 3 unit counts it cannot be left-one-out tested


def test_linear_data_picks_the_simpler_law():
    noise = {1: 1.003, 2: 0.996, 4: 1.002, 8: 0.998}
    choice = choose(points({n: 100.0 * n * noise[n] for n in noise}))
    assert choice.fit.law == LINEAR and choice.fit.rate(16) == pytest.approx(1600.0, rel=0.01)
    # exactly linear: every law predicts the left-out points alike, and the tie keeps linear
    assert choose(points({n: 100.0 * n for n in (1, 2, 4, 8)})).fit.law == LINEAR


def test_two_unit_counts_linear_within_the_spread_else_amdahl():
    within = choose(points({1: 100.0, 2: 198.0}, spread=0.02))
    assert within.fit.law == LINEAR
    assert within.why == "2x is within 1.96 measured sd of linear; 2 unit counts leave the USL under-determined"
    beyond = choose(points({1: 100.0, 2: 180.0}, spread=0.01))
    assert beyond.fit.law == AMDAHL and beyond.fit.sigma == pytest.approx(2 * 100 / 180 - 1)
    assert beyond.why.startswith("2x falls below linear by more than 1.96 measured sd; ")
    assert beyond.fit.rate(4) == pytest.approx(usl(4, sigma=2 * 100 / 180 - 1, kappa=0.0))
    # the same two points with ten times the spread: the departure is noise, linear stands
    assert choose(points({1: 100.0, 2: 180.0}, spread=0.1)).fit.law == LINEAR


def test_above_linear_is_held_to_linear():
    choice = choose(points({1: 100.0, 2: 230.0}))
    assert choice.fit.law == LINEAR and "at or above linear, so Amdahl's σ is 0" in choice.why


def test_the_interval_widens_with_the_spread():
    widths = []
    for spread in (0.005, 0.01, 0.04):
        f = choose(points({1: 100.0, 2: 180.0}, spread=spread)).fit
        low, high = f.interval(8)
        assert low < f.rate(8) < high
        widths.append(high - low)
    assert widths[0] < widths[1] < widths[2]


def test_residuals_beyond_the_spread_widen_the_interval():
    # three points off any law by far more than their (tiny) spread: the scatter sets the width
    pts = points({1: 100.0, 2: 150.0, 4: 390.0}, spread=0.001)
    f = fit(pts, LINEAR)
    low, high = f.interval(8)
    assert f.chi2 / f.dof > 1 and (high - low) / f.rate(8) > 0.1


def test_a_spread_too_wide_to_bound_the_top():
    f = fit(points({1: 100.0, 2: 180.0}, spread=0.3), AMDAHL)
    low, high = f.interval(8)
    assert high is None and 0 < low < f.rate(8)


def test_one_unit_count_is_said_not_fitted():
    assert choose(points({1: 100.0})) == "only 1x measured: one unit count, nothing to fit"
    (line,) = arm_lines(forecast_arm(SCALE_OUT, [ArmConfig("1x", 1, Point("1x", 1, 100.0, 1.0))]))
    assert line == "forecast, scale out: no forecast: only 1x measured: one unit count, nothing to fit (add 1x*2 to --variants)"


def test_flat_throughput_predicts_flat():
    f = choose(points({1: 100.0, 2: 100.0})).fit
    assert f.law == AMDAHL and f.sigma == pytest.approx(1.0)
    assert f.rate(4) == pytest.approx(100.0) and f.rate(8) == pytest.approx(100.0)


def test_declining_throughput_predicts_less_but_never_nothing():
    f = choose(points({1: 100.0, 2: 80.0})).fit
    assert f.law == AMDAHL and f.sigma > 1
    assert 0 < f.rate(8) < f.rate(4) < 80.0
    low, high = f.interval(8)
    assert 0 < low < f.rate(8) < high


def test_zero_spread_gives_no_interval_and_says_why():
    pts = [Point("1x", 1, 100.0, 0.0), Point("2x", 2, 180.0, 0.0)]
    choice = choose(pts)
    assert choice.fit.law == AMDAHL and choice.fit.interval(4) is None
    assert choice.why.startswith("no spread measured to hold 2x to linear")
    configs = [ArmConfig(p.config, p.units, p) for p in pts] + [ArmConfig("4x", 4, Point("4x", 4, 290.0, 3.0))]
    four = forecast_arm(SCALE_UP, configs)[0]
    assert four.check == ""
    assert four.line.startswith("forecast, scale up 4x: predicted 300.0 images/s at the peak (no interval: no spread "
                                "measured at 1x, 2x) from 1x, 2x; measured 290.0 (-3.3 %; no interval)")


def test_the_check_against_a_measured_config():
    one, two = Point("1x", 1, 100.0, 1.0), Point("2x", 2, 180.0, 1.8)
    f = fit([one, two], AMDAHL)
    low, high = f.interval(4)
    for measured, word in ((f.rate(4), "inside"), (high * 1.01, "above"), (low * 0.99, "below")):
        configs = [ArmConfig("1x", 1, one), ArmConfig("2x", 2, two), ArmConfig("4x", 4, Point("4x", 4, measured, 3.0))]
        four, eight = forecast_arm(SCALE_UP, configs)
        assert (four.config, [p.config for p in four.basis], four.check) == ("4x", ["1x", "2x"], word)
        assert four.line.split("; ")[1] == f"measured {measured:.1f}: {word}"
        assert [p.config for p in eight.basis] == ["1x", "2x", "4x"] and eight.measured is None
        assert "not measured in this study" in eight.line and "predicted" in eight.line


def test_a_config_without_a_sound_level_gives_no_point():
    configs = [ArmConfig("1x", 1, Point("1x", 1, 100.0, 1.0)), ArmConfig("2x", 2, None, "2x has no sound level")]
    (line,) = arm_lines(forecast_arm(SCALE_UP, configs))
    assert line == "forecast, scale up: no forecast: 2x has no sound level; only 1x measured: one unit count, nothing to fit"
    # a larger config that ran still predicts the next from what is sound, and names what it left out
    configs.append(ArmConfig("4x", 4, Point("4x", 4, 300.0, 3.0)))
    four, eight = forecast_arm(SCALE_UP, configs)
    assert four.choice is None and four.line == ("forecast, scale up 4x: no forecast: 2x has no sound level; only 1x "
                                                 "measured: one unit count, nothing to fit")
    assert eight.line.startswith("forecast, scale up 8x: predicted ") and "from 1x, 4x (2x has no sound level: left out)" in eight.line
