"""A streaming model's session on screen: the over-time chart plots output tokens/s and the time
to the first response, the knee is against tokens/s, and the sweep table shows TTFT, ITL and
tok/s with $ per million tokens instead of $ per 1000 images. Synthetic events with a fixed
clock (test inputs, not results); snapshots at 120x40, updated only after a deliberate change."""

from __future__ import annotations

import pytest
from rich.console import Console

from engine import events as ev
from tests.tui.synthetic import session_events
from tests.tui.test_snapshots import fed
from tui.state import SessionState
from tui.widgets.charts import render_knee, render_over_time


def _streaming(events: list[ev.Event]) -> list[ev.Event]:
    """The synthetic session as a streaming model's: each window and level streamed 8 tokens a request."""
    for e in events:
        if isinstance(e, (ev.WindowResult, ev.LevelResult)) and e.requests:
            e.stream = ev.StreamStats(ttft=ev.LatencyStats(count=e.requests, p50=0.004, p99=0.009),
                                      itl=ev.LatencyStats(count=7 * e.requests, p50=0.002, p99=0.005),
                                      responses_per_request=8, output_tokens_per_s=8 * e.throughput_rps,
                                      tokens_per_request=8)
    return events


def _text(renderable) -> str:
    console = Console(width=100, record=True)
    console.print(renderable)
    return console.export_text()


def test_the_charts_plot_tokens_and_ttft_for_a_streaming_model() -> None:
    state = SessionState()
    state.apply_all(_streaming(session_events(n_gpus=1, finish_levels=3)))
    over_time = _text(render_over_time(state, 90, 5))
    assert "tok/s per window" in over_time and "TTFT p99" in over_time and "infer/s" not in over_time
    assert "ms (log) vs tokens/s" in _text(render_knee(state, 90, 8))


def test_a_unary_session_keeps_its_inferences() -> None:
    """The knee's x axis and the over-time chart say infer/s, as the tables do (one unit name)."""
    state = SessionState()
    state.apply_all(session_events(n_gpus=1, finish_levels=3))
    over_time = _text(render_over_time(state, 90, 5))
    assert "infer/s per window" in over_time and "TTFT" not in over_time and "tok/s" not in over_time
    knee = _text(render_knee(state, 90, 8))
    assert "ms (log) vs infer/s" in knee and "images/s" not in knee


@pytest.mark.slow
def test_streaming_charts_at_120x40(snap_compare) -> None:
    app, run_before = fed(_streaming(session_events(n_gpus=1, finish_levels=3, end=False)))
    assert snap_compare(app, terminal_size=(120, 40), press=["6"], run_before=run_before)


@pytest.mark.slow
def test_streaming_sweep_table_at_120x40(snap_compare) -> None:
    app, run_before = fed(_streaming(session_events(n_gpus=1, finish_levels=3)))
    assert snap_compare(app, terminal_size=(120, 40), press=["2"], run_before=run_before)


def test_the_level_detail_shows_a_streaming_level_s_tokens_ttft_and_itl() -> None:
    from tui.level_detail import level_rows, render_level

    state = SessionState()
    state.apply_all(_streaming(session_events(n_gpus=1, finish_levels=3)))
    row = level_rows(state)[1]
    text = _text(render_level(state, row, 100))
    assert f"{row.stream.output_tokens_per_s:,.0f} tok/s" in text
    assert "TTFT p50 4.00  p90 -  p99 9.00" in text and "ITL  p50 2.00" in text
    assert "8.0 tokens and 8.0 responses per request" in text
    unary = SessionState()
    unary.apply_all(session_events(n_gpus=1, finish_levels=3))
    assert "TTFT" not in _text(render_level(unary, level_rows(unary)[1], 100))
