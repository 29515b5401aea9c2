"""Key flows of the Textual app, driven by Textual's pilot against small fakes and real recordings."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest
from textual.widgets import Input, OptionList

from engine import events as ev
from tests.tui.fakes import FakeControls, FakeReplay, ListSource
from tests.tui.synthetic import T0, session_events
from tui.app import GpuscaleApp
from tui.screens.base import ViewScreen
from tui.screens.dialogs import ConfirmQuit, ExportDialog, OpenRecordingDialog
from tui.screens.help import HelpScreen
from tui.widgets.sweep import SweepPanel

SIZE = (80, 24)


def live_app(events: list[ev.Event] | None = None, busy: bool = True, recording: Path | None = None):
    controls = FakeControls(recording)
    controls.busy = busy
    app = GpuscaleApp(controls=controls)
    source = ListSource(events if events is not None else session_events(finish_levels=2, end=False), linger=False)
    app.attach(source, start=False)
    return app, source, controls


def replay_app(events: list[ev.Event] | None = None):
    source = FakeReplay(events if events is not None else session_events())
    app = GpuscaleApp(replay=source)
    app.attach(source, replay=source, start=False)
    return app, source


def view_of(app: GpuscaleApp) -> str | None:
    """The name of the view on top (None under a dialog)."""
    return app.screen.view.name if isinstance(app.screen, ViewScreen) else None


def publish(source, events) -> None:  # noqa: ANN001
    for event in events:
        source.bus.publish(event)


@pytest.mark.slow
async def test_events_wait_for_the_refresh_tick_then_render_together() -> None:
    events = session_events(finish_levels=2, end=False)
    app, source, _ = live_app(events)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, events)
        # Published from "the source's thread": queued, not applied, until the timer fires.
        assert len(app.inbox) == len(events) and app.state.events_applied == 0
        table = app.screen.query_one(SweepPanel)
        deadline = time.monotonic() + 60
        # a busy box: several ticks, each folding what its time budget allows, the title drawn after each
        while (app.inbox or "2/4" not in (table.border_title or "")) and time.monotonic() < deadline:
            await pilot.pause(1 / app.refresh_hz)
        assert not app.inbox and app.state.events_applied == len(events)
        assert "3 levels" not in (table.border_title or "")
        assert (table.border_title or "").startswith("sweep · concurrency · 2/4 levels")


@pytest.mark.slow
async def test_live_controls_reach_the_session() -> None:
    app, source, controls = live_app(busy=False)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events(finish_levels=2, end=False))
        app.drain()
        await pilot.press("s", "p")
        assert controls.calls == ["sweep", "probe"]
        await pilot.press("x")  # nothing runs: stop is greyed out
        assert controls.calls == ["sweep", "probe"]
        controls.busy = True
        app.drain()
        await pilot.press("s", "x")  # a job runs: start is greyed out, stop works
        assert controls.calls == ["sweep", "probe", "cancel"]
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Stop the sweep", "Theme", "Open a recording", "View: training probe"} <= titles
        assert "Start the sweep" not in titles and "Replay: play / pause" not in titles


@pytest.mark.slow
async def test_live_controls_are_hidden_in_replay_and_replay_keys_in_live() -> None:
    app, source, controls = live_app()
    async with app.run_test(size=SIZE) as pilot:
        assert app.check_action("toggle_pause", ()) is False
        await pilot.press("space", "right")  # no replay: nothing happens, nothing breaks
        await pilot.press("o")  # no opening a recording over a running session
        assert view_of(app) == "live"
        assert any("live session is running" in n.message for n in app._notifications)
    app, replay = replay_app()
    async with app.run_test(size=SIZE):
        assert app.check_action("start_sweep", ()) is False and app.check_action("run_probe", ()) is False


@pytest.mark.slow
async def test_quitting_a_running_session_asks_first() -> None:
    app, source, _ = live_app()
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events(finish_levels=2, end=False))
        app.drain()
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmQuit)
        await pilot.press("n")
        assert view_of(app) == "live" and app.is_running
        await pilot.press("q", "y")
        await pilot.pause()
        assert app.return_value == 0 and not app.is_running


@pytest.mark.slow
async def test_quitting_a_finished_session_does_not_ask() -> None:
    app, source, _ = live_app(session_events())
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events())
        app.drain()
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


@pytest.mark.slow
async def test_views_help_and_back_and_a_hidden_view_catches_up() -> None:
    app, source, _ = live_app()
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events())
        app.drain()
        await pilot.press("2")
        assert view_of(app) == "sweep"
        await pilot.press("3")
        assert view_of(app) == "probe"
        # Probe results arrived while this view did not exist: it renders them when shown.
        assert app.screen.query_one("#probe").border_title.startswith("training probe · 3 results")
        await pilot.press("4")
        assert view_of(app) == "log"
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert view_of(app) == "log"
        await pilot.press("1")
        assert view_of(app) == "live"


@pytest.mark.slow
async def test_replay_controls() -> None:
    app, replay = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        publish(replay, session_events(finish_levels=2, end=False))
        app.drain()
        await pilot.press("space", "space", "right", "right", "left", "plus", "plus", "minus")
        await pilot.press("right_square_bracket", "left_square_bracket", "full_stop")
        assert replay.calls == [
            ("pause",), ("resume",), ("seek", 10.0), ("seek", 20.0), ("seek", 10.0),
            ("speed", 2.0), ("speed", 5.0), ("speed", 2.0),
            ("seek_level", 3), ("seek_level", 2), ("step",),  # `[` counts from the level `]` is seeking to
        ]
        bar = app.screen.query_one("#replay-bar")
        assert bar.display and "2x" in str(bar.render())
        # A dialog owns its keys: no seeking while the help is open.
        await pilot.press("question_mark", "space", "right")
        assert len(replay.calls) == 11
        await pilot.press("escape")
        for _ in range(12):
            await pilot.press("plus")
        assert replay.speed is None  # max
        await pilot.press("minus")
        assert replay.speed == 100.0


async def test_replay_reset_clears_the_screens() -> None:
    app, replay = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        publish(replay, session_events())
        app.drain()
        assert len(app.state.levels) == 4
        publish(replay, [ev.ReplayReset(position_s=0.0, ts=T0)] + session_events(finish_levels=1, end=False))
        app.drain()
        await pilot.pause()
        assert len(app.state.levels) == 2 and app.state.ended is None


@pytest.mark.slow
async def test_export_writes_a_report_beside_the_recording(recording: Path) -> None:
    app, source, _ = live_app(session_events(), recording=recording)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events())
        app.drain()
        await pilot.press("e")
        assert isinstance(app.screen, ExportDialog)
        options = app.screen.query_one(OptionList)
        options.highlighted = 2  # Markdown
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        exported = [p for p in recording.parent.iterdir() if p.suffix == ".md"]
        assert len(exported) == 1 and exported[0].stat().st_size > 0


@pytest.mark.slow
async def test_open_a_recording_replays_it_in_the_same_screens(recording: Path) -> None:
    opened: list[Path] = []

    def opener(path: Path) -> FakeReplay:
        from engine.record.replay_source import ReplaySource

        opened.append(path)
        return ReplaySource(path, speed=None, linger=False)

    app, source, _ = live_app(session_events())
    app.opener = opener
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events())
        app.drain()
        await pilot.press("o")
        assert isinstance(app.screen, OpenRecordingDialog)
        field = app.screen.query_one(Input)
        field.value = str(recording)
        await pilot.press("enter")
        assert opened == [recording] and app.replay is not None and app.controls is None
        for _ in range(50):  # the replay thread publishes at max speed; bounded wait
            await pilot.pause(0.1)
            if app.state.ended is not None:
                break
        assert len(app.state.levels) == 4 and app.state.ended is not None
        assert app.check_action("toggle_pause", ()) is True
    assert not app.stop_sources(timeout=5.0)


@pytest.mark.slow
async def test_opening_a_missing_file_is_a_notification_not_a_crash(tmp_path: Path) -> None:
    app, replay = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        app.screen.query_one(Input).value = str(tmp_path / "nope.sqlite")
        await pilot.press("enter")
        await pilot.pause()
        assert app.replay is replay
        assert any("no such file" in n.message for n in app._notifications)


async def test_stop_sources_stops_and_joins_the_source() -> None:
    app, source, _ = live_app()
    source.linger = True
    source.start()
    assert source.running
    assert app.stop_sources(timeout=5.0) == []
    assert source.stop_calls == 1 and not source.running


@pytest.mark.slow
async def test_real_replay_source_plays_pauses_and_seeks_back(recording: Path) -> None:
    from engine.record.replay_source import ReplaySource

    source = ReplaySource(recording, speed=None)  # as fast as possible, then lingers for seeking
    app = GpuscaleApp(replay=source)
    app.attach(source, replay=source)
    try:
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(50):  # bounded: the whole recording arrives within a few ticks
                await pilot.pause(0.1)
                if app.state.ended is not None:
                    break
            assert len(app.state.levels) == 4 and app.state.ended is not None
            end = source.position_s
            await pilot.press("left")  # 10 s back: ReplayReset, then the events up to there
            assert source.paused  # at max speed a seek pauses where it lands (space at the end plays again)
            for _ in range(50):
                await pilot.pause(0.1)
                if app.state.ended is None and not app.inbox:
                    break
            assert source.position_s == pytest.approx(end - 10.0)
            assert app.state.ended is None and 0 < len(app.state.levels) <= 4
            assert app.state.elapsed_s <= end - 10.0 + 1e-6
    finally:
        assert not app.stop_sources(timeout=5.0)


@pytest.mark.slow
async def test_the_command_palette_offers_start_stop_and_probe() -> None:
    """The palette is a modal screen; the live controls must still be listed there."""
    from textual.command import CommandList, CommandPalette

    app, source, controls = live_app(busy=False)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events(finish_levels=2, end=False))
        app.drain()
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"start")
        prompts: list[str] = []
        for _ in range(30):  # the palette searches in a worker: bounded wait for its results
            await pilot.pause(0.1)
            found = app.screen.query_one(CommandList)
            prompts = [str(found.get_option_at_index(i).prompt) for i in range(found.option_count)]
            if prompts:
                break
        assert any("Start the sweep" in p for p in prompts), prompts
        await pilot.press("enter")
        await pilot.pause()
        assert controls.calls == ["sweep"]


@pytest.mark.slow
async def test_a_burst_of_seeks_adds_up(recording: Path) -> None:
    """Three `right` in one burst seek 30 s, three `]` advance three levels, even
    before the replay thread has caught up with the first (here it has not started at all)."""
    from engine.record.replay_source import ReplaySource

    source = ReplaySource(recording, speed=1.0, paused=True)
    app = GpuscaleApp(replay=source)
    app.attach(source, replay=source, start=False)
    try:
        async with app.run_test(size=SIZE) as pilot:
            assert source.duration_s > 30
            await pilot.press("right", "right", "right")
            assert source.position_s == pytest.approx(30.0)
            await pilot.press("right_square_bracket", "right_square_bracket", "right_square_bracket")
            assert source.position_s == pytest.approx(source.levels[2])
            source.start()  # now the seek happens, and the screen shows level 2
            for _ in range(50):
                await pilot.pause(0.1)
                if not source.seeking and not app.inbox and app.state.current_level == 2:
                    break
            assert app.state.current_level == 2 and not source.seeking
            await pilot.press("right_square_bracket")
            for _ in range(50):
                await pilot.pause(0.1)
                if not source.seeking and not app.inbox and app.state.current_level == 3:
                    break
            assert app.state.current_level == 3
    finally:
        assert not app.stop_sources(timeout=5.0)


def panel_text(panel) -> str:  # noqa: ANN001
    return "".join(segment.text for segment in panel._segments)


@pytest.mark.slow
async def test_a_second_sweep_keeps_the_first_sweeps_table() -> None:
    """The live screen dropped the first sweep's table when a second one started."""
    from tests.tui.synthetic import two_sweep_events
    from tui.widgets.status import StatusBar

    events = two_sweep_events()
    app, source, _ = live_app(events)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, events)
        app.drain()
        await pilot.press("2")  # the sweep view: room for both tables
        await pilot.pause()
        panel = app.screen.query_one(SweepPanel)
        text = panel_text(panel)
        assert panel.border_title.startswith("sweep 2 · concurrency · 1/4 levels")
        assert "sweep 1 · 4 levels measured" in text
        assert "217.0" in text and " 1,500 " in text  # this sweep's level 1, the first sweep's top level
        status = str(app.screen.query_one(StatusBar).render())
        # once the sweep is done the bar gives its answer (engine/analysis/answer.py)
        assert "answer: peak, 4 GPUs: 217.0 images/s at concurrency 1" in status and "sweep 2 done: 1 level," in status


@pytest.mark.slow
async def test_a_remote_server_that_fails_reads_as_it_is() -> None:
    """At 80x24: "ours" CPU near the floor at 1 % (a fixed scale, not full bars), a fatal error
    shows FAILED, not WAITING, and a remote server is "remote", never "the model runs on the CPU"."""
    from tests.tui.synthetic import profile
    from tui.glyphs import SPARK_CHARS
    from tui.widgets.gpus import GpuPanel
    from tui.widgets.status import StatusBar

    remote = {**profile(gpu_count=0), "server": {"kind": "remote", "url": "http://gpu-box:8000"}}
    events: list[ev.Event] = [ev.SessionStarted(session_id="s", profile_name="remote", profile=remote, mode="sweep",
                                                host={"cpu_cores": 4}, ts=T0)]
    events += [ev.HostSample(cpu_percent=50.0, own_cpu_percent=4.0, mem_used=2**30, mem_total=2**32, ts=T0 + i)
               for i in range(1, 6)]  # 4 % of one core = 1 % of this 4-core machine
    events += [ev.Error(source="session", message="cannot reach Triton at http://gpu-box:8000: refused", fatal=True,
                        ts=T0 + 6), ev.SessionEnded(status="failed", error="cannot reach Triton", exit_code=2, ts=T0 + 6)]
    app, source, _ = live_app(events)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, events)
        app.drain()
        await pilot.pause()
        gpus = panel_text(app.screen.query_one(GpuPanel))
        assert "the server is remote" in gpus and "runs on the CPU" not in gpus
        ours = gpus.split("ours ", 1)[1].strip().split(" ", 1)[0]
        assert ours and set(ours) <= set(SPARK_CHARS[:2]), ours  # near the floor, not full bars
        assert "1.0%" in gpus.split("ours ", 1)[1]
        status = str(app.screen.query_one(StatusBar).render())
        assert status.lstrip().startswith("FAILED") and "WAITING" not in status


@pytest.mark.slow
async def test_the_end_of_a_replay_does_not_say_playing() -> None:
    app, replay = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        publish(replay, session_events())
        app.drain()
        replay.finished = True  # the real source: every event published and a SessionEnded among them
        app.screen.query_one("#replay-bar").tick()
        await pilot.pause()
        text = str(app.screen.query_one("#replay-bar").render())
        assert "end" in text and "playing" not in text


@pytest.mark.slow
async def test_the_recording_path_is_on_the_screen_and_in_the_help(tmp_path: Path) -> None:
    """The recording's path, absolute, is on the screen while the session runs (not printed after the
    screen closes), and the help keeps it."""
    path = tmp_path / "rec.sqlite"
    app, source, _ = live_app(recording=path)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events(finish_levels=1, end=False))
        app.drain()
        await pilot.pause()
        from tui.widgets.notices import NoticesPanel

        assert str(path.resolve()).rsplit("/", 1)[1] in panel_text(app.screen.query_one(NoticesPanel))
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert f"This session is recorded to `{path.resolve()}`" in app.screen.text


def screen_lines(app) -> list[str]:  # noqa: ANN001
    """The terminal as a person sees it, one string per row: the screen (over the screens a dialog
    covers) composed as Textual's own screenshot composes it, as plain text rather than an SVG
    (a tenth of the CPU: the tests poll it)."""
    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor",
                      record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    rows = console.export_text().split("\n")[:height]
    return [row.ljust(width) for row in rows] + [" " * width] * (height - len(rows))


@pytest.mark.slow
async def test_at_80x24_every_view_keeps_its_headers() -> None:
    """At 80x24 each view keeps what it needs whole: the replay footer, the windows table's
    header, the over-time panel's queue/compute rows above the fold, warnings and the probe status
    not cut mid-word."""
    events = session_events(levels=(1, 2, 4, 8, 16, 32, 64), finish_levels=7, end=False, probe=False)
    events.append(ev.Warning(source="load", message="level 64 took " + "much longer than its windows " * 3 + "planned",
                             ts=events[-1].ts))
    app, source, _ = live_app(events)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, events)
        app.drain()
        await pilot.press("2")
        await pilot.pause(0.5)
        rows = screen_lines(app)
        assert len(rows) == 24 and rows[1].strip().startswith("SWEEP")  # nothing scrolled off the top
        text = "\n".join(rows)
        assert "windows of level 64" in text and re.search(r"\n#?\s*(window|#)\s+kind\s+infer/s", text), text
        assert "queue ms" in text and "compute ms" in text  # the over-time rows that say where time goes
        assert re.search(r"level\s+infer/s", text)
        await pilot.press("4")
        await pilot.pause(0.3)
        text = "\n".join(screen_lines(app))
        assert "planned" in text  # the long warning wrapped whole, not cut
    probe = [e for e in session_events(end=False) if not isinstance(e, ev.AllReduceResult)]
    app, replay = replay_app(probe)
    async with app.run_test(size=SIZE) as pilot:
        publish(replay, probe)
        app.drain()
        # the footer composes its keys after the first refresh: wait for it, however long a busy
        # box takes (a fixed second was not always enough), bounded only against a hang
        for _ in range(600):
            await pilot.pause(0.1)
            rows = screen_lines(app)
            if rows[-1].strip():
                break
        assert rows[-1].rstrip().endswith("^p palette") and "-+ Speed" in rows[-1]
        status = rows[2]
        assert "3 probe results" in status and "…" not in status, status


@pytest.mark.slow
async def test_the_live_screen_draws_throughput_against_load_at_80x24() -> None:
    """At 80x24 the live screen draws the throughput-vs-concurrency curve beside the over-time
    sparklines."""
    events = session_events(levels=(1, 2, 4, 8, 16, 32, 64), finish_levels=7, end=False, probe=False)
    app, source, _ = live_app(events)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, events)
        app.drain()
        await pilot.pause(0.3)
        rows = screen_lines(app)
        header = next(i for i, row in enumerate(rows) if re.match(r"level\s+infer/s", row))
        assert rows[header].rstrip().endswith("throughput")
        column = rows[header].index("throughput")
        bars = [row[column:].rstrip() for row in rows[header + 2: header + 9]]
        assert all(set(bar) <= set("█▏▎▍▌▋▊▉") and bar for bar in bars), bars
        cells = [len(bar) for bar in bars]  # infer/s 180, 360, 720, 1440, 1500, 1500, 1500
        assert cells == sorted(cells) and cells[0] < cells[3] and cells[4] == cells[5] == cells[6] >= 10


@pytest.mark.slow
async def test_a_backlog_is_folded_in_slices_between_keys_to_the_same_state() -> None:
    """A tick with its budget spent folds one batch; the rest follows in slices with gaps between
    them (a key pressed meanwhile is answered), in order, to the state that folding everything at
    once gives."""
    from tui.app import FOLD_CHECK_EVERY

    events = session_events()
    assert len(events) > 2 * FOLD_CHECK_EVERY
    whole, _ = replay_app(events)
    publish(whole.replay, events)
    async with whole.run_test(size=SIZE):
        whole.drain()
        assert not whole.inbox and whole.state.events_applied == len(events)

    app, source = replay_app(events)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, events)
        app.drain(0.0)  # no time to spare: one batch, then the event loop's turn
        assert app.state.events_applied == FOLD_CHECK_EVERY and len(app.inbox) == len(events) - FOLD_CHECK_EVERY
        await pilot.press("4")
        for _ in range(len(events)):  # at least one event a slice
            if not app.inbox:
                break
            await pilot.pause(0.05)
        assert view_of(app) == "log" and not app.inbox
        app.drain()
        assert app.state.events_applied == len(events)
        assert app.state.levels.keys() == whole.state.levels.keys()
        assert app.state.current_level == whole.state.current_level and app.state.ended == whole.state.ended


async def test_the_footer_is_rebuilt_when_its_keys_change_and_only_then() -> None:
    from textual.widgets._footer import FooterKey

    from tui.widgets.footer import KeysFooter

    app, source, controls = live_app(busy=False)
    async with app.run_test(size=SIZE) as pilot:
        publish(source, session_events(finish_levels=2, end=False))
        app.drain()
        await pilot.pause()

        def stop_key() -> FooterKey:
            return next(k for k in app.screen.query_one(KeysFooter).query(FooterKey) if k.action == "cancel_sweep")

        before = stop_key()
        assert before.has_class("-disabled")  # nothing runs: stop is greyed out
        await pilot.press("2")
        await pilot.pause()
        await pilot.press("1")
        await pilot.pause()
        assert stop_key() is before  # the same keys: the same widgets, not mounted again
        controls.busy = True
        while stop_key().has_class("-disabled"):  # a job runs: the footer is rebuilt with stop enabled
            await pilot.pause(0.05)
        assert stop_key() is not before


@pytest.mark.slow
async def test_every_view_is_composed_ahead_so_a_switch_composes_nothing() -> None:
    from textual.app import App

    from tui.widgets.footer import KeysFooter
    from tui.widgets.view import ViewBody

    app, source, _ = live_app()
    async with app.run_test(size=SIZE) as pilot:
        names = {v.name for v in app.shown_views()}
        assert names - {"live"}  # hidden views to compose
        await pilot.press("6")  # a key at once: the first screen left before it was styled for good

        def composed() -> bool:
            return (set(app.view_screens) == names and all(s.is_mounted and s.query(ViewBody) for s in app.view_screens.values())
                    and all(s._css_update_count == app._css_update_count for s in app.view_screens.values()))

        deadline = time.monotonic() + 60  # a busy box
        while not composed() and time.monotonic() < deadline:
            await pilot.pause(0.05)  # after start, in the app's idle moments
        assert composed()
        assert view_of(app) == "charts"  # composed off-screen: the view shown stayed up
        bodies = {name: s.query_one(ViewBody) for name, s in app.view_screens.items()}
        assert all(b.size.width == SIZE[0] for b in bodies.values())  # and laid out at the terminal's size
        # every screen styled ahead, and each footer's keys made: a first showing makes neither
        keys = {name: list(s.query_one(KeysFooter).children) for name, s in app.view_screens.items()}
        assert all(keys.values())
        restyled = 0

        def refresh_css(*args: object, **kwargs: object) -> None:
            nonlocal restyled
            restyled += 1
            App.refresh_css(app, *args, **kwargs)

        app.refresh_css = refresh_css  # type: ignore[method-assign]
        for key, name in (("2", "sweep"), ("3", "probe"), ("4", "log"), ("6", "charts"), ("1", "live")):
            await pilot.press(key)
            assert list(app.view_screens[name].query_one(KeysFooter).children) == keys[name], name
        assert restyled == 0
        publish(source, session_events())
        app.drain()
        for key, name in (("2", "sweep"), ("3", "probe"), ("4", "log"), ("6", "charts"), ("1", "live")):
            screen = app.view_screens[name]
            await pilot.press(key)
            assert app.screen is screen and screen.query_one(ViewBody) is bodies[name]  # nothing new composed
        assert set(app.view_screens) == names
        # What arrived while the probe view was hidden is on it once shown.
        await pilot.press("3")
        assert app.screen.query_one("#probe").border_title.startswith("training probe · 3 results")


async def test_a_refresh_tick_after_the_screens_are_gone_does_nothing() -> None:
    """The refresh timer can fire once more while the app exits (seen beside two CPU hogs: the
    tick set a reactive whose binding refresh asked for a screen, and there was none)."""
    app, _, _ = live_app(busy=False)
    async with app.run_test(size=SIZE):
        pass
    app.set_reactive(GpuscaleApp.live, not app.live_running)  # a change the tick would make
    app._tick()
    assert app.live != app.live_running  # left alone: nothing to show it on
