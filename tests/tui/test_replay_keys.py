"""The replay's keys at the end of a replay, driven as a person would (Textual's pilot at 80x24,
a real replay source over a real recording)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tui.app import GpuscaleApp

SIZE = (80, 24)


async def wait_until(pilot, condition: Callable[[], bool], tries: int = 60) -> bool:  # noqa: ANN001
    """Bounded: the replay thread and the refresh tick catch up within a few tenths of a second."""
    for _ in range(tries):
        await pilot.pause(0.1)
        if condition():
            return True
    return condition()


@pytest.mark.slow
async def test_at_the_end_of_a_replay_every_rewind_key_rewinds(recording: Path) -> None:
    """At the end ←, [, space and home each do what they say: a seek at max speed stops paused where
    it lands (not played on to the end at once), space on an ended replay plays it from the start,
    home goes to the start."""
    from engine.record.replay_source import ReplaySource

    source = ReplaySource(recording, speed=None)
    app = GpuscaleApp(replay=source)
    app.attach(source, replay=source)
    try:
        async with app.run_test(size=SIZE) as pilot:
            def at_end() -> bool:
                return source.finished and not app.inbox and app.state.ended is not None

            assert await wait_until(pilot, at_end)
            end, last_level = source.position_s, app.state.current_level
            assert last_level is not None and last_level > 0
            await pilot.press("left")
            assert await wait_until(pilot, lambda: not source.seeking and not app.inbox)
            assert source.position_s == pytest.approx(end - 10.0) and app.state.ended is None
            assert "paused" in str(app.screen.query_one("#replay-bar").render())

            await pilot.press("space")  # play on: at max speed, straight to the end
            assert await wait_until(pilot, at_end)
            await pilot.press("left_square_bracket")
            assert await wait_until(pilot, lambda: not source.seeking and not app.inbox)
            assert app.state.current_level == last_level - 1 and app.state.ended is None

            await pilot.press("home")
            assert await wait_until(pilot, lambda: not source.seeking and not app.inbox)
            assert source.position_s == pytest.approx(0.0) and not app.state.levels

            await pilot.press("space")
            assert await wait_until(pilot, at_end)
            await pilot.press("space")  # at the end: from the start again
            assert await wait_until(pilot, lambda: not source.seeking and not app.inbox)
            assert source.position_s == pytest.approx(0.0) and app.state.ended is None
    finally:
        assert not app.stop_sources(timeout=5.0)


@pytest.mark.slow
async def test_space_at_the_end_plays_the_replay_again_at_its_speed(recording: Path) -> None:
    from engine.record.replay_source import ReplaySource

    source = ReplaySource(recording, speed=10.0, paused=True)
    app = GpuscaleApp(replay=source)
    app.attach(source, replay=source)
    try:
        async with app.run_test(size=SIZE) as pilot:
            source.seek(source.duration_s - 1.0)
            source.resume()
            assert await wait_until(pilot, lambda: source.finished and not app.inbox and app.state.ended is not None)
            await pilot.press("space")
            # played again from the start (the state folded anew: no end yet), at the speed it had;
            # where it has got to by now is the box's pace, not the key's business
            assert await wait_until(pilot, lambda: app.state.ended is None and source.position_s > 0.0)
            assert not source.paused and source.speed == 10.0
    finally:
        assert not app.stop_sources(timeout=5.0)
