"""The live view's breakdown never shows a negative time: where the server's time per request
came out past the client's latency (windows read at slightly different edges), client+net is
n/a, not "-3.91 ms". And its figures stay whole at 80 columns: the bar gives way first."""

from __future__ import annotations

from engine import events as ev
from tests.structs import replace
from tests.tui.synthetic import session_events
from tui.state import SessionState
from tui.widgets.timeline import breakdown_line


def _with_last_gap(gap: float, queue: float | None = None) -> SessionState:
    events = session_events(finish_levels=2, end=False)
    last = max(i for i, e in enumerate(events) if isinstance(e, ev.WindowResult) and e.server is not None)
    window = events[last]
    assert isinstance(window, ev.WindowResult) and window.server is not None
    server = replace(window.server, client_minus_server=gap)
    if queue is not None:
        server = replace(server, queue=queue)
    events[last] = replace(window, server=server)
    state = SessionState()
    state.apply_all(events)
    return state


def test_a_negative_client_and_network_time_is_not_shown_as_a_time():
    line = breakdown_line(_with_last_gap(-0.00391), 100).plain
    assert "client+net n/a" in line and "-3.91" not in line and "-" not in line.split("client+net")[1]


def test_a_positive_one_is():
    assert "client+net 0.40 ms" in breakdown_line(_with_last_gap(0.0004), 100).plain


def test_at_80_columns_the_figures_stay_whole_and_the_bar_gives_way():
    # long figures: a second of queueing, 13.4 ms outside the server
    state = _with_last_gap(0.0134, queue=1.066)
    for width in (76, 60):
        line = breakdown_line(state, width).plain
        assert len(line) <= width and line.endswith("client+net 13.4 ms"), (width, line)
    assert "█" in breakdown_line(state, 76).plain
