"""Energy per image from counter deltas, and the study's marginal gains and "stop at N" (pure)."""

import pytest

from engine.analysis.energy import counter_at, energy_between, joules_per_image
from engine.analysis.study import ConfigPoint, efficiency, marginal_steps, stop_at

SERIES = [(10.0, 1000.0), (11.0, 1300.0), (12.0, 1600.0), (13.0, 1900.0)]  # 300 W


def test_counter_interpolates_between_samples():
    assert counter_at(SERIES, 11.5) == pytest.approx(1450.0)
    assert counter_at(SERIES, 12.0) == 1600.0
    assert counter_at(SERIES, 9.9) is None and counter_at(SERIES, 13.1) is None


def test_energy_between_window_ends():
    assert energy_between(SERIES, 10.5, 12.5) == pytest.approx(600.0)


def test_counter_going_backwards_gives_none():
    reset = [(10.0, 5000.0), (11.0, 10.0), (12.0, 310.0)]
    assert energy_between(reset, 10.0, 12.0) is None


def test_joules_per_image_sums_the_config_gpus():
    other = [(t, e / 2) for t, e in SERIES]  # 150 W
    value = joules_per_image({"0": SERIES, "1": other}, 10.0, 12.0, images=900)
    assert value == pytest.approx((600.0 + 300.0) / 900)
    assert joules_per_image({"0": SERIES}, 10.0, 14.0, 100) is None  # window not covered
    assert joules_per_image({}, 10.0, 12.0, 100) is None
    assert joules_per_image({"0": SERIES}, 10.0, 12.0, 0) is None


def test_efficiency_per_unit():
    assert efficiency(1800.0, 2, 1000.0, 1) == pytest.approx(0.9)
    assert efficiency(None, 2, 1000.0, 1) is None


def test_marginal_steps_per_added_gpu():
    steps = marginal_steps([ConfigPoint("1x", 1, 1000.0, 0.5), ConfigPoint("2x", 2, 1900.0, 0.52),
                            ConfigPoint("4x", 4, 2500.0, 0.8)])
    assert [(s.from_variant, s.to_variant, s.added_units) for s in steps] == [("1x", "2x", 1), ("2x", "4x", 2)]
    assert steps[0].gain_per_unit == pytest.approx(900.0) and steps[0].marginal == pytest.approx(0.9)
    assert steps[1].gain_per_unit == pytest.approx(300.0) and steps[1].marginal == pytest.approx(0.3)
    assert steps[1].cost_change == pytest.approx(0.28)


def test_stop_where_an_added_gpu_gives_less_than_half():
    verdict = stop_at([ConfigPoint("4x", 4, 2500.0, 0.8), ConfigPoint("1x", 1, 1000.0, 0.5),
                       ConfigPoint("2x", 2, 1900.0, 0.52)])
    assert (verdict.variant, verdict.units) == ("2x", 2)
    assert "stop at 2 GPUs" in verdict.reason and "4x" in verdict.reason and "30 %" in verdict.reason
    assert "$/1000 images goes from $0.520 to $0.800" in verdict.reason and "adds +300 images/s" in verdict.reason


def test_linear_scaling_stops_at_the_largest_measured():
    verdict = stop_at([ConfigPoint("1x", 1, 1000.0), ConfigPoint("2x", 2, 1950.0), ConfigPoint("4x", 4, 3800.0)])
    assert verdict.variant == "4x" and "largest config measured" in verdict.reason
    assert "the last one (2x -> 4x) adds +925 images/s per added GPU (peak), 92 % of what one GPU gives in 1x" \
        in verdict.reason


def test_the_largest_measured_says_how_close_the_last_step_came_and_the_cost():
    # the 4x H200 study's figures at p99 <= 50 ms: the last step just over the bar, the cost per
    # image up by 41 % from 1x
    verdict = stop_at([ConfigPoint("1x", 1, 4904.0, 0.000198), ConfigPoint("2x", 2, 8835.0, 0.000220),
                       ConfigPoint("4x", 4, 13881.0, 0.000280)], basis="at p99 <= 50 ms")
    assert verdict.variant == "4x"
    assert "adds +2,523 images/s per added GPU (at p99 <= 50 ms), 51 % of what one GPU gives in 1x" in verdict.reason
    assert "$/1000 images goes from $0.000198 in 1x to $0.000280 in 4x" in verdict.reason


def test_a_larger_config_without_result_ends_the_climb():
    verdict = stop_at([ConfigPoint("1x", 1, 1000.0), ConfigPoint("2x", 2, None)], basis="at p99 <= 50 ms")
    assert verdict.variant == "1x" and "2x gave no usable result (at p99 <= 50 ms)" in verdict.reason


def test_no_result_anywhere():
    assert stop_at([ConfigPoint("1x", 1, None)]).variant is None


def test_smallest_config_without_result_is_said():
    verdict = stop_at([ConfigPoint("1x", 1, None), ConfigPoint("2x", 2, 1500.0), ConfigPoint("4x", 4, 3000.0)])
    assert verdict.variant == "4x" and verdict.reason.startswith("1x gave no usable result")


def test_cpu_instances_as_units():
    verdict = stop_at([ConfigPoint("cpu", 1, 1000.0), ConfigPoint("cpu2", 2, 1100.0)], unit="CPU instance")
    assert verdict.variant == "cpu" and "stop at 1 CPU instance:" in verdict.reason
