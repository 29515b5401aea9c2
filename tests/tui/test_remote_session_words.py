"""A session against a remote server says what is true of it: quitting does not stop that server,
and the GPU panel asks for server.metrics_url only where it is not set."""

from __future__ import annotations

from textual.app import App

from engine import events as ev
from tui.screens.dialogs import ConfirmQuit
from tui.state import SessionState
from tui.widgets.gpus import render_gpus


async def _dialog_text(stops_server: bool) -> str:
    app: App[None] = App()
    async with app.run_test() as pilot:
        app.push_screen(ConfirmQuit(None, stops_server=stops_server))
        await pilot.pause()
        return " ".join(str(label.render()) for label in app.screen.query("Label"))


async def test_quitting_a_remote_session_does_not_say_its_server_stops():
    assert "Its server stops" not in await _dialog_text(stops_server=False)
    assert "The session is idle. Quit? Its server stops." in await _dialog_text(stops_server=True)


def _gpu_note(server: dict) -> str:
    state = SessionState()
    state.apply(ev.SessionStarted(session_id="s", profile_name="box", profile={"server": server}, mode="sweep"))
    return render_gpus(state, 100, detail=False).plain


def test_the_gpu_panel_asks_for_a_metrics_url_only_where_none_is_set():
    without = _gpu_note({"kind": "remote", "url": "http://box:8000"})
    assert "set server.metrics_url" in without
    given = _gpu_note({"kind": "remote", "url": "http://box:8000", "metrics_url": "http://box:8002/metrics"})
    assert "waiting for GPU telemetry from the server's /metrics" in given and "set server.metrics_url" not in given
    several = _gpu_note({"kind": "remote", "urls": ["http://a:8000", "http://b:8000"],
                         "metrics_urls": ["http://a:8002/metrics", "http://b:8002/metrics"]})
    assert "set server.metrics_url" not in several
