"""The one formatting module's rules (engine/format.py's docstring states them): "not available"
never looks like zero, and each kind of figure has one reading."""

from __future__ import annotations

from engine import format as fmt


def test_missing_values_render_as_the_one_na_marker() -> None:
    for render in (fmt.ms, fmt.us, fmt.rate, fmt.percent, fmt.percent_points, fmt.times, fmt.ratio, fmt.gib,
                   fmt.size, fmt.gbps, fmt.bytes_rate, fmt.watts, fmt.money, fmt.batch, fmt.duration,
                   fmt.epoch_time):
        assert render(None) == fmt.NA
    assert fmt.ms(float("nan")) == fmt.NA and fmt.p_value(None, True) == fmt.NA


def test_milliseconds_keep_three_significant_figures() -> None:
    assert fmt.ms(0.0029) == "2.90"
    assert fmt.ms(0.01235) == "12.3"  # the screen and the report alike
    assert fmt.ms(0.1234) == "123"
    assert fmt.ms(1.2345) == "1,234"
    assert fmt.ms(0.0) == "0.00"


def test_throughput_reads_with_thousands_separators_never_k() -> None:
    assert fmt.rate(180.0) == "180.0" and fmt.rate(1454.4) == "1,454"
    assert fmt.rate(12345.6) == "12,346"  # never 12.3k, on any surface


def test_percent_ratios_money_and_memory() -> None:
    assert fmt.percent(0.93) == "93%" and fmt.percent(0.045) == "4.5%" and fmt.percent_points(87.0) == "87%"
    assert fmt.times(3.4) == "3.40x" and fmt.batch(7.24) == "7.2"
    assert fmt.money(0.000694) == "$0.000694" and fmt.money(1.5) == "$1.50" and fmt.money(0.0) == "$0.00"
    assert fmt.gib(0.52 * 2**30) == "0.52" and fmt.gib(79.6 * 2**30) == "79.6" and fmt.gib(80 * 2**30, 0) == "80"
    assert fmt.p_value(0.0004, True) == "<0.001*" and fmt.p_value(0.21, False) == "0.210"


def test_levels() -> None:
    assert fmt.level("concurrency", 16.0) == "16"
    assert fmt.level("rate", 12.5) == "12.5/s"
    assert fmt.level_value(12.5) == "12.5"


def test_durations_and_session_clock() -> None:
    assert fmt.duration(45) == "45s" and fmt.duration(185) == "3m05s" and fmt.duration(3720) == "1h02m"
    assert fmt.clock(75.9) == "01:15" and fmt.clock(3725) == "1:02:05" and fmt.clock(None) == "--:--"


def test_time_per_epoch() -> None:
    assert [fmt.epoch_time(s) for s in (0.4823, 2.414, 48.24, 59.99, 185, 96_000)] == [
        "0.482s", "2.41s", "48.2s", "1m00s", "3m05s", "26h40m"]
    assert fmt.epoch_time(float("inf")) == fmt.NA


def test_sizes_bandwidth_and_all_reduce_time() -> None:
    assert fmt.size(1024) == "1 KiB" and fmt.size(64 * 2**20) == "64 MiB" and fmt.size(3 * 2**30) == "3 GiB"
    assert fmt.size(1536) == "1.5 KiB"
    assert fmt.body_size(602_112) == "602 KB"
    assert fmt.us(0.005) == "5,000.0" and fmt.gbps(214.7) == "214.70"
    assert fmt.bytes_rate(1.5e9) == "1.500 GB/s" and fmt.bytes_rate(2e6) == "2.00 MB/s"


def test_prices_are_bounded_and_money_has_a_bounded_width() -> None:
    """cost_per_hour = 1e308 printed a 534-character dollar figure, 1e-300 three hundred zeros."""
    assert fmt.price_problem(0.0) is None and fmt.price_problem(98.32) is None and fmt.price_problem(0.0001) is None
    for slip in (1e308, 20_000.0, 1e-300, -1.0, float("nan"), float("inf"), True, "5"):
        assert fmt.price_problem(slip) is not None, slip
    assert fmt.price_problem(20_000.0, gpus=16) is None  # a price per box: a bigger box may cost more
    for value in (1e308, 1e-300, 1e15, 123456789.0, 0.000694, 12.5):
        assert len(fmt.money(value)) <= fmt.MONEY_WIDTH, fmt.money(value)
    assert fmt.money(1e308) == "$1.00e+308" and fmt.money(1e-300) == "$1.00e-300"
    assert fmt.money(1234.5) == "$1,234.50"  # ordinary figures unchanged
