"""ctrl+c in the TUI: during a run it asks the quit question (docked at the bottom), a second
ctrl+c leaves at once with 130, n or escape go back to the run; in a replay it leaves at once."""

from __future__ import annotations

import pytest

from tests.tui.synthetic import session_events
from tests.tui.test_app_pilot import live_app, publish, replay_app, view_of
from tui.app import exit_code
from tui.screens.dialogs import ConfirmQuit

SIZES = [(80, 24), (120, 40)]


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
async def test_ctrl_c_asks_then_a_second_ctrl_c_leaves_interrupted(size: tuple[int, int]) -> None:
    app, source, _ = live_app()
    async with app.run_test(size=size) as pilot:
        publish(source, session_events(finish_levels=2, end=False))
        app.drain()
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, ConfirmQuit) and app.is_running
        assert not any("ctrl+q" in n.message for n in app._notifications)  # not Textual's hint
        dialog = app.screen.query_one(".dialog")
        assert dialog.region.bottom == size[1] and dialog.region.width == size[0]  # at the bottom, full width
        text = " ".join(str(label.render()) for label in app.screen.query("Label"))
        assert "Stop it and quit?" in text and "ctrl+c" in text, text
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running and app.return_code == 130
    assert exit_code(app, source) == 130  # the session ended well: the app's 130 stands


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("key", ["n", "escape"])
async def test_ctrl_c_then_n_or_escape_goes_back_to_the_run(size: tuple[int, int], key: str) -> None:
    app, source, controls = live_app()
    async with app.run_test(size=size) as pilot:
        publish(source, session_events(finish_levels=2, end=False))
        app.drain()
        await pilot.press("ctrl+c", key)
        assert view_of(app) == "live" and app.is_running and "cancel" not in controls.calls
        await pilot.press("ctrl+c", "y")  # y after ctrl+c: stop and quit, still an interruption
        await pilot.pause()
        assert not app.is_running and app.return_code == 130


@pytest.mark.slow
async def test_ctrl_c_in_a_replay_leaves_at_once() -> None:
    app, _ = replay_app()
    async with app.run_test(size=SIZES[0]) as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running and app.return_code == 130


def test_a_failed_run_stays_failed_after_ctrl_c() -> None:
    class Ended:
        return_code = 130

    class Source:
        exit_code = 1

    assert exit_code(Ended(), Source()) == 1  # type: ignore[arg-type]


@pytest.mark.slow
async def test_ctrl_c_over_the_help_asks_too() -> None:
    from tui.screens.help import HelpScreen

    app, source, _ = live_app()
    async with app.run_test(size=SIZES[0]) as pilot:
        publish(source, session_events(finish_levels=2, end=False))
        app.drain()
        await pilot.press("question_mark", "ctrl+c")
        assert isinstance(app.screen, ConfirmQuit)
        await pilot.press("escape")
        assert isinstance(app.screen, HelpScreen) and app.is_running
