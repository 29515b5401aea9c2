import pytest

from engine.analysis.saturation import saturation_point


def test_first_level_within_5_percent_of_the_peak() -> None:
    # peak 1000 at 64; 0.95 x 1000 = 950: 16 has 900 (no), 32 has 960 (yes)
    s = saturation_point([(1, 100), (4, 400), (8, 700), (16, 900), (32, 960), (64, 1000), (128, 990)])
    assert s is not None and s.reached
    assert (s.level, s.throughput, s.max_level, s.max_throughput) == (32, 960, 64, 1000)


def test_still_rising_at_the_end_is_not_saturation() -> None:
    s = saturation_point([(1, 100), (4, 400), (8, 800)])
    assert s is not None and not s.reached and s.level is None and s.max_level == 8
    assert "not saturated" in s.describe()


def test_last_step_inside_the_tolerance_counts_as_saturated() -> None:
    # 8 -> 16 adds 4 %: within 5 % of the peak, so 8 is the saturation point
    s = saturation_point([(16, 1040), (4, 500), (8, 1000)])  # order of input does not matter
    assert s is not None and s.reached and s.level == 8


def test_falling_past_the_peak() -> None:
    s = saturation_point([(1, 100), (2, 200), (4, 150)])
    assert s is not None and s.reached and s.level == 2 and s.max_level == 2


def test_edge_cases() -> None:
    assert saturation_point([]) is None
    single = saturation_point([(4, 100)])
    assert single is not None and not single.reached
    tolerant = saturation_point([(1, 80), (2, 100), (4, 100)], tolerance=0.25)
    assert tolerant is not None and tolerant.level == 1  # 80 >= 0.75 x 100
    with pytest.raises(ValueError):
        saturation_point([(1, 1)], tolerance=1.5)


def test_client_bound_levels_above_are_named_not_called_the_highest() -> None:
    # a sweep 16..128 where the client was the limit from 32 up: 16 is the lowest level measured,
    # so "the highest concurrency (16)" would be false
    s = saturation_point([(16, 2614.0)], left_out=[32, 64, 128])
    assert s is not None and not s.reached
    text = s.describe()
    assert "highest concurrency (16" not in text
    assert "32, 64, 128" in text and "client-bound" in text and "16 (2614/s)" in text


def test_still_rising_names_the_sweeps_highest_level() -> None:
    s = saturation_point([(1, 100), (4, 400), (8, 800)], left_out=[2])  # a client-bound level below: not named
    assert s is not None and s.left_out_above == ()
    assert "highest concurrency, 8 (800/s)" in s.describe()
