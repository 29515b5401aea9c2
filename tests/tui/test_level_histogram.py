"""The level drill-down's latency histogram: drawn from the level's recorded distribution
(LatencyStats.histogram) where it has one, its bins holding every request; a level recorded
without one keeps the ladder of percentiles. Synthetic events (test inputs, not results)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from rich.console import Console

from engine import events as ev
from engine.analysis.percentiles import latency_stats
from tests.structs import replace
from tests.tui.synthetic import session_events
from tui.level_detail import HISTOGRAM_BINS, level_rows, render_level
from tui.state import SessionState


def _text(events: list[ev.Event], compact: bool = False) -> str:
    state = SessionState()
    state.apply_all(events)
    row = level_rows(state)[0]
    console = Console(width=110, record=True, color_system=None)
    console.print(render_level(state, row, 100, compact=compact))
    return console.export_text()


def test_the_drill_down_draws_the_recorded_distribution() -> None:
    samples = np.random.default_rng(5).lognormal(np.log(4e6), 0.5, 3000).astype(np.int64)
    latency = latency_stats(samples, histogram=True)
    events = [replace(e, latency=latency) if isinstance(e, ev.LevelResult) and e.index == 0 else e
              for e in session_events(n_gpus=1, finish_levels=2, end=True)]
    text = _text(events)
    assert "latency histogram (requests per bin, log scale)" in text
    rows = re.findall(r"^\s*([\d.]+)-([\d.]+)\s+ms .* ([\d,]+)$", text, re.MULTILINE)
    assert len(rows) == HISTOGRAM_BINS
    assert sum(int(count.replace(",", "")) for _lo, _hi, count in rows) == samples.size
    # from the fastest request to the slowest (as printed: three digits)
    assert float(rows[0][0]) == pytest.approx(samples.min() / 1e6, rel=0.01)
    assert float(rows[-1][1]) == pytest.approx(samples.max() / 1e6, rel=0.01)
    assert "p99" in text  # the percentiles stay, on one line under it
    assert "latency percentiles" in _text(events, compact=True)  # a short terminal keeps the one line


def test_a_level_without_a_recorded_distribution_keeps_the_percentiles() -> None:
    text = _text(session_events(n_gpus=1, finish_levels=2, end=True))
    assert "latency histogram" not in text and "latency percentiles (log scale)" in text
