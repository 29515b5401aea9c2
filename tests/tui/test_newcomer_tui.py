"""What a newcomer tripped over in the TUI, each driven as a person would (Textual's pilot at
80x24, real replay sources over real recordings where the replay is concerned)."""

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
    """At the end ←, [, space and home did nothing (at max speed a seek played on to the end at
    once; space paused an ended replay; home was not a key)."""
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
            assert await wait_until(pilot, lambda: app.state.ended is None and source.position_s > 0.0)
            assert not source.paused and not source.finished
            assert source.position_s < source.duration_s / 2
    finally:
        assert not app.stop_sources(timeout=5.0)


def second_sweep_stopped_at_its_second_level() -> list:
    """`s` again after a full sweep, then `x` during its second level (an interrupted row)."""
    from engine import events as ev
    from tests.tui.synthetic import breakdown, latency, two_sweep_events

    events = two_sweep_events()[:-1]  # the second sweep's first level, not yet finished
    t = events[-1].ts
    events.append(ev.LevelStarted(mode="concurrency", level=2, index=1, total=4, workers=2, ts=t + 1))
    events.append(ev.LevelResult(
        mode="concurrency", level=2, index=1, status="interrupted", batch_size=1, windows=1, merged_windows=0,
        requests=100, errors=0, throughput_rps=300.0, throughput_ips=300.0, latency=latency(0.0031),
        server=breakdown(0.0, 0.0016, 0.9), audit=ev.ClientAudit(cpu_percent=34.0, cpu_cores=16), duration_s=2.0,
        ts=t + 3))
    events.append(ev.SweepFinished(levels=2, stable=1, failed=0, ts=t + 3.5))
    return events


def sweep_panel_lines(rows: list[str]) -> list[str]:
    """The rows of the screen from the sweep panel's title to the next panel's."""
    start = next(i for i, row in enumerate(rows) if row.lstrip("─").startswith("sweep 2 ·"))
    end = next((i for i in range(start + 1, len(rows)) if rows[i].startswith("─") and any(c.isalpha() for c in rows[i])),
               len(rows) - 1)  # a titled border; the table's own rule under its head has no words
    return rows[start:end]


@pytest.mark.slow
async def test_a_second_sweep_shows_its_own_rows_under_its_title_at_80x24() -> None:
    """The live view followed the panel's end, which is the first sweep's table: under the
    "sweep 2" title were sweep 1's rows until home was pressed."""
    from tests.tui.synthetic import two_sweep_events
    from tests.tui.test_app_pilot import live_app, publish, screen_lines

    events = two_sweep_events()[:-1]  # running: its first level measured
    app, source, _ = live_app(events)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, events[:-1])  # sweep 2's level is running ...
        app.drain()
        await pilot.pause(0.3)
        publish(source, events[-1:])  # ... and now measured
        app.drain()
        await pilot.pause(0.3)
        panel = sweep_panel_lines(screen_lines(app))
        assert any(row.lstrip().startswith("1    217.0") for row in panel), "\n".join(panel)


@pytest.mark.slow
async def test_an_interrupted_level_keeps_the_throughput_bars_at_80x24() -> None:
    """The word "interrupted" widened the status column past the room kept for the bars: the
    second sweep's bars vanished (the first's stayed, on a table of other widths)."""
    from tests.tui.test_app_pilot import live_app, publish, screen_lines

    events = second_sweep_stopped_at_its_second_level()
    app, source, _ = live_app(events)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, events)
        app.drain()
        for key in ("1", "2"):
            await pilot.press(key)
            await pilot.pause(0.3)
            panel = sweep_panel_lines(screen_lines(app))
            text = "\n".join(panel)
            assert "through" in panel[1], text  # the head of sweep 2's table ("through…" at 8 cells)
            interrupted = next(row for row in panel if "interrupted" in row)
            assert "300.0" in interrupted and "█" in interrupted, text


@pytest.mark.slow
async def test_open_in_a_live_session_says_what_is_true() -> None:
    """`o` said "quit it (q) before opening a recording": q leaves the app."""
    from tests.tui.test_app_pilot import live_app

    app, _, _ = live_app(busy=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        message = list(app._notifications)[-1].message
        assert "quit it (q) before" not in message
        assert "gpuscale-tui replay" in message and "leaves the app" in message, message


@pytest.mark.slow
async def test_the_quit_dialog_says_whether_anything_runs() -> None:
    """It said "A session is running" while the session sat idle between sweeps."""
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


def test_the_readme_names_each_view_key_as_the_tool_does() -> None:
    """The README said "the study view (key 5)" where a plain session's footer says 1234: key 5
    is the study's only."""
    from tui.screens.views import VIEWS

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    for view in VIEWS:
        named = f"`{view.key}` {view.title}" + (", in `study` only" if view.study_only else "")
        assert named in readme, named


def test_ours_is_a_share_of_the_host_in_the_help_the_screen_and_the_log() -> None:
    """The help said "both 0-100 %" while the headless line printed "ours 180%" (of one core)."""
    import io

    from rich.console import Console

    from engine import events as ev
    from tests.tui.synthetic import T0, profile
    from tui.headless import HeadlessPrinter
    from tui.screens.help import HELP

    out = io.StringIO()
    printer = HeadlessPrinter(Console(file=out, width=160))
    printer(ev.SessionStarted(session_id="s", profile_name="cpu", profile=profile(gpu_count=0), mode="sweep",
                              host={"cpu_cores": 4}, ts=T0))
    printer(ev.HostSample(cpu_percent=60.0, own_cpu_percent=180.0, mem_used=2**30, mem_total=2**32, ts=T0 + 1))
    printer.finish(0, None)
    line = next(row for row in out.getvalue().splitlines() if "telemetry:" in row)
    assert "ours 45% of the host" in line and "180%" not in line, line
    assert "% of the whole machine" in HELP and "0-100 %" in HELP


@pytest.mark.slow
async def test_the_recording_path_is_in_the_warnings_panel_whole_not_over_it(tmp_path: Path) -> None:
    """A toast put the path over the warnings for 8 s and broke it mid-word at 80 columns."""
    from tests.tui.synthetic import session_events
    from tests.tui.test_app_pilot import live_app, panel_text, publish
    from tui.widgets.notices import NoticesPanel

    path = tmp_path / "a_rather_long_folder_name" / "recordings" / "cpu_0gpu_local_20240101T000000Z.sqlite"
    app, source, _ = live_app(recording=path)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events(finish_levels=1, end=False))
        app.drain()
        await pilot.pause(0.3)
        assert not any(str(path.resolve()) in n.message for n in app._notifications)
        text = panel_text(app.screen.query_one(NoticesPanel))
        lines = [line.strip() for line in text.splitlines()]
        start = next(i for i, line in enumerate(lines) if line.startswith("recording to"))
        shown = "".join(lines[start:]).removeprefix("recording to").split("(?", 1)[0].strip()
        assert shown == str(path.resolve()), lines[start:]
        for line in lines[start:-1]:  # each line breaks after a folder's slash, never inside a name
            assert line.endswith("/") or line == "recording to", lines[start:]
