"""The app's questions say what is true: opening a recording during a live session, quitting while
idle or while a sweep runs (Textual's pilot at 80x24)."""

from __future__ import annotations

import pytest

SIZE = (80, 24)


@pytest.mark.slow
async def test_open_in_a_live_session_says_what_is_true() -> None:
    """`o` during a live session says how to open a recording (`gpuscale-tui replay`) and that q
    leaves the app, never "quit it (q) before opening"."""
    from tests.tui.test_app_pilot import live_app

    app, _, _ = live_app(busy=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        message = list(app._notifications)[-1].message
        assert "quit it (q) before" not in message
        assert "gpuscale-tui replay" in message and "leaves the app" in message, message


@pytest.mark.slow
async def test_the_quit_dialog_says_whether_anything_runs() -> None:
    """Idle between sweeps, the quit dialog says so; during a sweep, it names what runs."""
    from engine import events as ev
    from tests.tui.synthetic import session_events
    from tests.tui.test_app_pilot import live_app, publish
    from tui.screens.dialogs import ConfirmQuit

    events = [*session_events(finish_levels=4, probe=False, end=False),
              ev.PhaseChanged(phase="idle", detail="waiting: start a sweep or the probe")]
    app, source, controls = live_app(events, busy=False)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, events)
        app.drain()
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmQuit)
        text = " ".join(str(label.render()) for label in app.screen.query("Label"))
        assert "idle" in text and "running" not in text, text
        await pilot.press("n")
        controls.busy = True
        publish(source, [ev.PhaseChanged(phase="sweep", detail="")])
        app.drain()
        await pilot.press("q")
        text = " ".join(str(label.render()) for label in app.screen.query("Label"))
        assert "Running: sweep. Stop it and quit?" in text, text
