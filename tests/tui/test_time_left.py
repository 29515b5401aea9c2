"""The sweep's time left moves during a level (issue 54: it once stood still for a minute, then
jumped): re-read at every window, the likely figure follows the windows as they stretch, while
the ceiling it claims never rises within the level (what was shown still holds)."""

from __future__ import annotations

from engine import events as ev
from tests.structs import replace
from tests.tui.synthetic import session_events
from tui.state import SessionState


def test_time_left_moves_within_a_level_and_its_ceiling_holds():
    events = session_events(finish_levels=1, end=False)  # the second level runs; the first was timed
    state = SessionState()
    state.apply_all(events)
    running = [e for e in events if isinstance(e, ev.LevelStarted)][-1]
    last = [e for e in events if isinstance(e, ev.WindowResult)][-1]
    likely, high = [], []
    t = last.t_end
    for w in range(4):  # each window longer than the last: the plan's window length is passed
        length = 4.0 * (w + 1)
        window = replace(last, index=last.index + 1 + w, t_start=t, t_end=t + length, ts=t + length,
                                     stable_so_far=False)
        t += length
        state.apply(window)
        progress = state.progress()
        assert progress.level_index == running.index and progress.time_left is not None
        assert progress.time_left.high_s is not None
        likely.append(progress.time_left.likely_s)
        high.append(progress.time_left.high_s)
    assert all(b > a for a, b in zip(likely, likely[1:], strict=False)), likely  # the pace slows: later
    assert all(b <= a for a, b in zip(high, high[1:], strict=False)), high
