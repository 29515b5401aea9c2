"""Formatting and text charts: "not available" never looks like zero."""

from __future__ import annotations

from tui import format as fmt


def test_missing_values_render_as_na() -> None:
    for render in (fmt.ms, fmt.rate, fmt.percent, fmt.ratio, fmt.gib, fmt.watts, fmt.dollars, fmt.duration):
        assert render(None) == fmt.NA
    assert fmt.ms(float("nan")) == fmt.NA


def test_milliseconds_precision_follows_magnitude() -> None:
    assert fmt.ms(0.0029) == "2.90"
    assert fmt.ms(0.0364) == "36.4"
    assert fmt.ms(0.1234) == "123"
    assert fmt.ms(0.0) == "0.00"


def test_rates_and_levels() -> None:
    assert fmt.rate(180.0) == "180.0" and fmt.rate(1454.4) == "1454" and fmt.rate(17000.0) == "17.0k"
    assert fmt.level_label("concurrency", 16.0) == "16"
    assert fmt.level_label("rate", 12.5) == "12.5/s"


def test_durations_and_session_clock() -> None:
    assert fmt.duration(45) == "45s" and fmt.duration(185) == "3m05s" and fmt.duration(3720) == "1h02m"
    assert fmt.clock(75.9) == "01:15" and fmt.clock(3725) == "1:02:05" and fmt.clock(None) == "--:--"


def test_sparkline_scales_and_keeps_gaps() -> None:
    assert fmt.spark([0, 50, 100], 3, 0, 100) == "▁▅█"
    assert fmt.spark([None, 100], 2, 0, 100) == " █"
    assert fmt.spark([1, 2, 3, 4], 2, 0, 4) == "▆█"  # only the newest values that fit
    assert fmt.spark([5, 5], 4) == "  ▅▅"  # a flat series is not an empty one
    assert fmt.spark([], 3) == "   " and fmt.spark([1], 0) == ""


def test_bar_has_eighth_cell_resolution() -> None:
    assert fmt.bar(0.5, 4) == "██░░"
    assert fmt.bar(0.25, 2) == "▌░"
    assert fmt.bar(1 / 16, 2) == "▏░"
    assert fmt.bar(2.0, 3) == "███"
    assert fmt.bar(None, 3) == "   "


def test_sizes_in_binary_units() -> None:
    assert fmt.size(1024) == "1 KiB" and fmt.size(64 * 2**20) == "64 MiB" and fmt.size(3 * 2**30) == "3 GiB"
    assert fmt.size(1536) == "1.5 KiB"
