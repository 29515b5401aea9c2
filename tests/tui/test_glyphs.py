"""Text charts: sparklines and gauges."""

from __future__ import annotations

from tui import glyphs


def test_sparkline_scales_and_keeps_gaps() -> None:
    assert glyphs.spark([0, 50, 100], 3, 0, 100) == "▁▅█"
    assert glyphs.spark([None, 100], 2, 0, 100) == " █"
    assert glyphs.spark([1, 2, 3, 4], 2, 0, 4) == "▆█"  # only the newest values that fit
    assert glyphs.spark([5, 5], 4) == "  ▅▅"  # a flat series is not an empty one
    assert glyphs.spark([], 3) == "   " and glyphs.spark([1], 0) == ""


def test_bar_has_eighth_cell_resolution() -> None:
    assert glyphs.bar(0.5, 4) == "██░░"
    assert glyphs.bar(0.25, 2) == "▌░"
    assert glyphs.bar(1 / 16, 2) == "▏░"
    assert glyphs.bar(2.0, 3) == "███"
    assert glyphs.bar(None, 3) == "   "
