"""A streaming sweep's columns on screen and in the headless log: live from its windows, then
from the merged level; a unary sweep's table is unchanged."""

from __future__ import annotations

from engine import columns
from engine import events as ev
from tests.tui.synthetic import session_events
from tui import tables
from tui.state import SessionState

STREAM = ev.StreamStats(ttft=ev.LatencyStats(count=10, p50=0.004, p99=0.0125),
                        itl=ev.LatencyStats(count=70, p50=0.0028, p99=0.0078),
                        responses_per_request=8, output_tokens_per_s=328.5)


def _window(stream: ev.StreamStats | None) -> ev.WindowResult:
    return ev.WindowResult(level=1, index=1, warmup=False, t_start=0.0, t_end=1.0, requests=10, errors=0,
                           throughput_rps=10.0, throughput_ips=10.0, latency=ev.LatencyStats(count=10, p50=0.02),
                           stream=stream)


def test_a_running_streaming_level_shows_its_windows_figures() -> None:
    state = SessionState()
    state.apply_all([ev.LevelStarted(mode="concurrency", level=1, index=0, total=1), _window(STREAM)])
    keys = [c.key for c in tables.sweep_columns(state)]
    assert set(columns.STREAM_KEYS) <= set(keys) and "cost_mtok" not in keys  # no price, no $/Mtok
    cells = tables.sweep_cells(state.levels[0], state)
    assert cells["ttft_p99"] == "12.5" and cells["itl_p50"] == "2.80" and cells["tokens"] == "328.5"


def test_a_unary_sweep_keeps_its_columns() -> None:
    state = SessionState()
    state.apply_all(session_events())
    shown = tables.sweep_columns(state)
    assert [c.key for c in shown] == [c.key for c in columns.without_cost(columns.SWEEP_SCREEN, state.cost_per_hour)]
    assert [c.key for c in shown if c.optional] == ["p95", "batch", "errors", "cost"]  # p95: what a narrow screen spares
