"""The sweep's time left counts down during a level: re-estimated when a level starts, it never
rises while that level runs, even as its windows stretch (windows wait for enough requests)."""

from __future__ import annotations

import dataclasses

from engine import events as ev
from tests.tui.synthetic import T0, session_events
from tui.state import SessionState


def test_time_left_never_rises_within_a_level():
    events = session_events(finish_levels=0, end=False)  # the first level runs: no level timed yet
    state = SessionState()
    state.apply_all(events)
    running = [e for e in events if isinstance(e, ev.LevelStarted)][-1]
    last = [e for e in events if isinstance(e, ev.WindowResult)][-1]
    shown = []
    t = last.t_end
    for w in range(6):  # each window longer than the last: the plan's window length is passed
        length = 4.0 * (w + 1)
        window = dataclasses.replace(last, index=last.index + 1 + w, t_start=t, t_end=t + length, ts=t + length)
        t += length
        state.apply(window)
        state.apply(ev.HostSample(cpu_percent=10.0, mem_used=1, mem_total=2, ts=t))  # the clock moves
        progress = state.progress()
        assert progress.level_index == running.index and progress.eta_s is not None
        shown.append(progress.eta_s)
    assert all(b <= a for a, b in zip(shown, shown[1:], strict=False)), shown
    # the next level starts: a new estimate, which may be longer (the windows did stretch)
    state.apply(ev.LevelResult(mode="concurrency", level=running.level, index=running.index, status="stable",
                               batch_size=1, windows=3, merged_windows=3, requests=10, errors=0, throughput_rps=1.0,
                               throughput_ips=1.0, latency=last.latency, duration_s=t - running.ts, ts=t + 0.1))
    state.apply(ev.LevelStarted(mode="concurrency", level=8, index=running.index + 1, total=running.total,
                                workers=2, ts=t + 0.2))
    state.apply(ev.HostSample(cpu_percent=10.0, mem_used=1, mem_total=2, ts=t + 0.3))
    assert state.progress().eta_s is not None and T0 < t
