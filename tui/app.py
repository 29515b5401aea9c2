"""The Textual app: thin on logic. Events arrive on the source's thread, wait in a queue, and
are folded into SessionState a few times a second; the visible view then re-renders what
changed. Its views, their keys, footer labels, help lines and commands come from one table
(`VIEWS`, tui/screens/views.py). Actions only forward to the live session (controls) or the
replay source (replay), read through tui/host.py's Protocols; the keys they allow follow three
reactives (busy, live, replaying).
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen

from engine.errors import UserError
from engine.events import Event
from engine.outcome import EXIT_INTERRUPTED
from engine.source import EventSource
from tui.host import LiveControls, ReplayControls
from tui.screens.base import View, ViewScreen
from tui.screens.dialogs import ConfirmQuit, ExportDialog, OpenRecordingDialog, QuitAnswer
from tui.screens.help import HelpScreen, help_text
from tui.screens.views import VIEWS
from tui.state import SessionState
from tui.study_state import StudyState

if TYPE_CHECKING:
    from engine.record.replay_source import ReplaySource

REFRESH_HZ = 5.0  # SSH-friendly: batch events and render at most this often
FOLD_BUDGET_S = 0.015  # a refresh folds queued events this long at most, so keys wait no longer
FOLD_GAP_S = 0.035  # and leaves the event loop at least this long before the backlog's next slice
COMPOSE_AHEAD_GAP_S = 0.05  # between composing one hidden view's screen and the next, after start
FOLD_CHECK_EVERY = 16  # events folded between looks at the clock
HANG_UP_GRACE_S = 5.0  # after a hang-up, how long the sessions' end waits for Textual's own exit
JOIN_TIMEOUT_S = 120.0  # a live session stops its server and workers within this
SPEEDS: tuple[float | None, ...] = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 100.0, None)  # None: max
SEEK_STEP_S = 10.0
IDLE_PHASES = frozenset({"idle", "sweep done", "wire check done"})  # a live session waiting for a request
LIVE_ACTIONS = frozenset({"start_sweep", "cancel_sweep", "run_probe"})
REPLAY_ACTIONS = frozenset({"toggle_pause", "seek", "seek_start", "speed", "seek_level", "step"})

VIEW_KEYS = Binding.Group("Views", compact=True)
SEEK = Binding.Group("Seek", compact=True)
SPEED = Binding.Group("Speed", compact=True)


def view_bindings(views: Sequence[View]) -> list[Binding]:
    """A key per view, grouped in the footer; the app hides those it does not show (check_action)."""
    return [Binding(v.key, f"switch_mode({v.name!r})", v.label, group=VIEW_KEYS) for v in views]


def recording_candidates(folder: Path = Path("recordings")) -> list[Path]:
    """Recordings in the default folder, newest first, for the open dialog's completion."""
    try:
        files = [p for p in folder.glob("*.sqlite") if p.is_file()]
    except OSError:
        return []
    return sorted(files, key=lambda p: p.stat().st_mtime, reverse=True)


def open_replay(path: Path) -> ReplaySource:
    """A replay source for a recording (engine/record); its errors are UserErrors."""
    from engine.record.replay_source import ReplaySource

    return ReplaySource(path)


class SessionBusy(Message):
    """The live session started or ended a job (posted from its thread)."""

    def __init__(self, busy: bool) -> None:
        super().__init__()
        self.busy = busy


class GpuscaleApp(App[int]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: a subclass elsewhere finds it too
    TITLE = "gpuscale-tui"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (34, "-tall")]
    VIEWS: ClassVar[Sequence[View]] = VIEWS  # its modes (added per app: their screens read the app)
    DEFAULT_MODE = "live"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True),  # not Textual's "press ctrl+q" hint
        Binding("question_mark,f1", "help", "Help", key_display="?"),
        *view_bindings(VIEWS),
        Binding("s", "start_sweep", "Sweep"),
        Binding("x", "cancel_sweep", "Stop"),
        Binding("p", "run_probe", "Probe"),
        Binding("e", "export", "Export"),
        Binding("o", "open_recording", "Open", show=False),
        Binding("space", "toggle_pause", "Pause", priority=True, key_display="␣"),  # the glyph, not "space": the footer fits 80 columns
        Binding("left", "seek(-1)", "-10s", priority=True, group=SEEK),
        Binding("right", "seek(1)", "+10s", priority=True, group=SEEK),
        Binding("home", "seek_start", "Start", show=False, priority=True),  # live: the panels' own Home
        Binding("minus", "speed(-1)", "Slower", group=SPEED),
        Binding("plus,equals_sign", "speed(1)", "Faster", group=SPEED),
        Binding("left_square_bracket", "seek_level(-1)", "Previous level", show=False),
        Binding("right_square_bracket", "seek_level(1)", "Next level", show=False),
        Binding("full_stop", "step", "Step", show=False),
    ]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass with VIEWS of its own gets their keys (Textual merges a class's bindings
        when the class is made)."""
        if "VIEWS" in cls.__dict__:
            cls.BINDINGS = [*cls.__dict__.get("BINDINGS", []), *view_bindings(cls.VIEWS)]
        super().__init_subclass__(**kwargs)

    # what the keys allow follows these (check_action): a change refreshes the footer's bindings
    busy: reactive[bool | None] = reactive(None, bindings=True)  # the live session's word; None: unknown
    live: reactive[bool] = reactive(False, bindings=True)  # a live session runs (live_running)
    replaying: reactive[bool] = reactive(False, bindings=True)

    def __init__(
        self,
        *,
        controls: LiveControls | None = None,
        replay: ReplayControls | None = None,
        title: str = "gpuscale-tui",
        refresh_hz: float = REFRESH_HZ,
        opener: Callable[[Path], ReplaySource] = open_replay,
    ) -> None:
        super().__init__()
        self.title = title
        self._controls: LiveControls | None = None
        self._unwatch_busy: Callable[[], None] | None = None
        self.controls = controls
        self.replay = replay
        self.state = SessionState()
        self.study: StudyState | None = None  # a study's own state (the study app's)
        self.inbox: deque[Event] = deque()  # filled on the source's thread, drained on ours
        self.sources: list[EventSource] = []  # every source shown, stopped when the app ends
        self.refresh_hz = refresh_hz
        self.opener = opener
        self.hung_up = False
        self._unsubscribe: Callable[[], None] | None = None
        self._signals: list[int] = []
        self._level_target: int | None = None  # a level seek on its way: the next `]` counts from it
        self._fold_pending = False  # a slice of the inbox's backlog waits in the event loop
        self._folded_unseen = 0  # events folded by such slices since the last render
        self._told_recording: Path | None = None
        self.view_screens: dict[str, ViewScreen] = {}  # each view's screen, once made
        self.views_composed_ahead = False  # every view's screen made, laid out and styled, after start
        for view in self.VIEWS:
            self.add_mode(view.name, partial(self._make_view_screen, view))

    @property
    def controls(self) -> LiveControls | None:
        return self._controls

    @controls.setter
    def controls(self, controls: LiveControls | None) -> None:
        """The live session, or None: its job state reaches ``busy`` as it changes."""
        if self._unwatch_busy is not None:
            self._unwatch_busy()
            self._unwatch_busy = None
        self._controls = controls
        self.set_reactive(GpuscaleApp.busy, controls.busy if controls is not None else None)
        if controls is not None:
            self._unwatch_busy = controls.on_busy(lambda busy: self.post_message(SessionBusy(busy)))

    def on_session_busy(self, message: SessionBusy) -> None:
        if self._controls is not None:
            self.busy = message.busy

    def shown_views(self) -> list[View]:
        return [v for v in self.VIEWS if v.shown_by(self)]

    # ------------------------------------------------------------------ sources

    def attach(self, source: EventSource, replay: ReplayControls | None = None, start: bool = True) -> None:
        """Show ``source`` from now on: subscribe before starting so that no event is missed."""
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.inbox.clear()
        self.state.reset()
        self._level_target = None
        self.replay = replay
        self._unsubscribe = source.bus.subscribe(self.inbox.append)  # deque.append is thread-safe
        from engine.record.replay_source import ReplaySource

        if isinstance(source, ReplaySource):
            source.pace_by(self.inbox.__len__)  # at max speed, no further ahead than the screen can fold
        self.sources.append(source)
        if start:
            source.start()

    def stop_sources(self, timeout: float = JOIN_TIMEOUT_S) -> list[EventSource]:
        """Stop every source; return those still running after ``timeout`` seconds."""
        unsubscribe, self._unsubscribe = self._unsubscribe, None  # also called from the hang-up thread
        if unsubscribe is not None:
            unsubscribe()
        for source in self.sources:
            source.stop()
        return [s for s in self.sources if not s.join(timeout)]

    # ------------------------------------------------------------------ lifecycle

    def on_mount(self) -> None:
        self.set_interval(1.0 / self.refresh_hz, self._tick)
        if not self.is_headless and threading.current_thread() is threading.main_thread():
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGHUP, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, self._on_terminal_gone, sig)
                    self._signals.append(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass

    def _make_view_screen(self, view: View) -> ViewScreen:
        screen = ViewScreen(view, self)
        self.view_screens[view.name] = screen
        return screen

    def on_ready(self) -> None:
        self.run_worker(self._compose_views_ahead(), group="compose-views", exit_on_error=False)

    async def _compose_views_ahead(self) -> None:
        """Compose every view's screen off-screen in the app's first idle moments, one at a time,
        so that no key pays a screen's first composition and layout."""
        for view in self.shown_views():
            await asyncio.sleep(COMPOSE_AHEAD_GAP_S)
            while len(self.screen_stack) != 1 or not isinstance(self.screen, ViewScreen):
                await asyncio.sleep(COMPOSE_AHEAD_GAP_S)  # a dialog is up or a switch under way: later
            if not self.is_running:
                return  # shutting down: Textual is closing the modes' screens
            if view.name in self.view_screens:
                continue  # shown already (its key was pressed)
            shown = self.current_mode
            with self.batch_update():  # nothing of the hidden view is painted
                mounted = self.switch_mode(view.name)  # Textual's own mode start: its screen composes
                self.switch_mode(shown)  # and is suspended at once, as a view switched away from
            await mounted
            await self.view_screens[view.name].wait_for_refresh()  # laid out at the terminal's size
        await asyncio.sleep(COMPOSE_AHEAD_GAP_S)
        if self.is_running:
            self._restyle_stale_views()
            self.views_composed_ahead = True
        # What is made by now (Textual, the screens, their widgets) lives as long as the app: out of
        # the garbage collector's full passes, each of which would otherwise walk it all while
        # holding every thread (a key waits meanwhile).
        gc.freeze()

    def _restyle_stale_views(self) -> None:
        """A screen styled before the theme's last change (the app's first, when a key switched
        away from it before it was mounted): Textual restyles it on the key back to it, tens of ms
        of that key's time; restyled now instead, as App.refresh_css does a stack's screens."""
        stale = [s for s in self.view_screens.values() if s._css_update_count != self._css_update_count]
        if not stale:
            return
        if self.screen._css_update_count != self._css_update_count:
            self.refresh_css(animate=False)  # the stylesheet reparsed, the current screen restyled
        for screen in stale:
            if screen is not self.screen:
                self.stylesheet.update(screen, animate=False)
                screen._css_update_count = self._css_update_count

    def on_unmount(self) -> None:
        gc.unfreeze()  # collectable again once the app is gone (tests run many apps in one process)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for sig in self._signals:
            loop.remove_signal_handler(sig)

    def _on_terminal_gone(self, sig: int) -> None:
        """SIGHUP (the SSH connection dropped) or SIGTERM: leave now, no questions asked."""
        self.hung_up = sig == signal.SIGHUP
        if self.hung_up:
            # Stop the sessions now, not after Textual's shutdown: with the terminal gone that
            # shutdown can block for good (its writer thread's queue, seen under tmux kill-session),
            # and the recording and the server must not wait on it.
            threading.Thread(target=self._end_without_terminal, name="HangUp", daemon=True).start()
        self.exit(0)

    def _end_without_terminal(self) -> None:
        stuck = self.stop_sources()
        time.sleep(HANG_UP_GRACE_S)  # Textual's own exit normally wins; if not, leave without it
        code = self.sources[-1].exit_code if self.sources and not stuck else 1
        os._exit(code)

    def fold(self, event: Event) -> None:
        """One queued event into the state (the study app folds it into its study state too)."""
        self.state.apply(event)

    def drain(self, budget_s: float | None = None) -> None:
        """The refresh tick: fold queued events into the state, then render the visible view.
        ``budget_s``: fold at most this long (the timer's tick); what is left is folded in further
        slices between the event loop's other work (keys), not rendered until the next tick.
        None (a test, a direct call): fold everything now."""
        applied = self._fold_queued(budget_s) + self._folded_unseen
        self._folded_unseen = 0
        if self._level_target is not None and self.state.level_starts - 1 == self._level_target and not self.inbox:
            self._level_target = None  # arrived
        told = self._tell_recording()
        # The view under any dialog; none while a mode switch is under way.
        views = [s for s in self.screen_stack if isinstance(s, ViewScreen)]
        screen = views[-1] if views else None
        if screen is not None and screen.is_mounted:
            if applied or told:
                screen.show_state()
            screen.tick_replay()
        self.live = self.live_running
        self.replaying = self.replay is not None

    def _tick(self) -> None:
        try:
            closing = not self.screen_stack
        except KeyError:  # its modes already gone
            closing = True
        if closing:  # the app is exiting: no screen to draw on nor keys to refresh (a tick can come late)
            return
        self.drain(FOLD_BUDGET_S)

    def _fold_queued(self, budget_s: float | None) -> int:
        """Fold queued events in order; with a budget, stop once it is spent and fold on in a later
        slice, FOLD_GAP_S on, so that keys and drawing get most of the loop while a backlog lasts."""
        inbox, fold = self.inbox, self.fold
        applied = 0
        deadline = None if budget_s is None else time.perf_counter() + budget_s
        while inbox:
            fold(inbox.popleft())
            applied += 1
            if deadline is not None and applied % FOLD_CHECK_EVERY == 0 and time.perf_counter() >= deadline:
                break
        if inbox and deadline is not None and not self._fold_pending:
            self._fold_pending = True  # after a gap: a screen being mounted needs many turns of the loop
            self.set_timer(FOLD_GAP_S, self._fold_slice)
        return applied

    def _fold_slice(self) -> None:
        """A slice of a backlog, between ticks: folded, not rendered (the next tick renders it)."""
        self._fold_pending = False
        self._folded_unseen += self._fold_queued(FOLD_BUDGET_S)

    def _tell_recording(self) -> bool:
        """Once the live session knows its recording's path (it opens the file on its own thread),
        the warnings panel shows it, absolute, and the help keeps it (not a toast: a toast would cover
        the warnings and break the path mid-word)."""
        path = self.controls.recording_path if self.controls is not None else None
        if not path or (self.state.recording is not None and Path(path) == self._told_recording):
            return False  # (the state forgets it when it is reset)
        self._told_recording = Path(path)
        self.state.set_recording(Path(path).resolve())
        return True

    # ------------------------------------------------------------------ what is possible

    @property
    def live_running(self) -> bool:
        return self.controls is not None and self.state.ended is None

    def running_job(self) -> str | None:
        """What the live session is doing, by its phase (sweep, probe, box check ...); None when
        it sits idle waiting for a request (or has ended)."""
        if not self.live_running:
            return None
        if self.state.phase in IDLE_PHASES:
            return "a job" if self.busy else None  # asked for, its first event not here yet
        return self.state.phase

    def recording_path(self) -> Path | None:
        if self.controls is not None and self.controls.recording_path:
            return Path(self.controls.recording_path)
        if self.replay is not None and self.replay.path:
            return Path(self.replay.path)
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "switch_mode":  # no key for a view this app does not show
            return any((v.name,) == parameters for v in self.shown_views())
        if isinstance(self.screen, ModalScreen) and (action in REPLAY_ACTIONS or action in LIVE_ACTIONS):
            return False  # keys typed in a dialog belong to the dialog
        return self.action_possible(action)

    def action_possible(self, action: str) -> bool | None:
        """What the session allows now, whatever screen is on top: the command palette (itself
        a modal screen) lists by this, where check_action would hide every control."""
        if action in LIVE_ACTIONS:
            if self.controls is None:
                return False
            if not self.live_running:
                return None
            busy = self.busy
            if action == "start_sweep" or action == "run_probe":
                return None if busy else True
            if action == "cancel_sweep":
                return True if busy in (True, None) else None
        if action in REPLAY_ACTIONS:
            return self.replay is not None
        if action == "export":
            return True if self.recording_path() is not None else None
        return True

    # ------------------------------------------------------------------ actions

    async def action_quit(self) -> None:
        if self.live_running:
            server = self.state.server
            self.push_screen(ConfirmQuit(self.running_job(), stops_server=server is None or server.embedded),
                             self._quit_answered)
        else:
            self.exit(0)

    def action_interrupt(self) -> None:
        """ctrl+c: the quit question while a session runs (ctrl+c again there stops at once), else
        leave now; either way the app ends interrupted (130). Priority: it comes here over any dialog."""
        if isinstance(self.screen, ConfirmQuit):
            self.screen.dismiss("interrupt")
        elif self.live_running:
            server = self.state.server
            self.push_screen(ConfirmQuit(self.running_job(), stops_server=server is None or server.embedded),
                             partial(self._quit_answered, interrupted=True))
        else:
            self.exit(EXIT_INTERRUPTED, return_code=EXIT_INTERRUPTED)

    def _quit_answered(self, answer: QuitAnswer | None, interrupted: bool = False) -> None:
        if answer == "interrupt" or (answer == "quit" and interrupted):
            self.exit(EXIT_INTERRUPTED, return_code=EXIT_INTERRUPTED)
        elif answer == "quit":
            self.exit(0)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(help_text(self.shown_views(), self.recording_path(), self.controls is not None)))

    # the live and replay actions are allowed only with their source (check_action)
    def action_start_sweep(self) -> None:
        if self.controls is not None:
            self.controls.request_sweep()
            self.notify("sweep requested")

    def action_cancel_sweep(self) -> None:
        if self.controls is not None:
            self.controls.cancel_sweep()
            self.notify("stopping the current job")

    def action_run_probe(self) -> None:
        from engine.errors import missing_extra

        if missing := missing_extra("probe", "the training probe"):  # one message, not "requested" as well
            self.notify(missing, severity="warning")
            return
        if self.controls is not None:
            self.controls.request_probe()
        self.notify("training probe requested")

    def _replay_do(self, call: Callable[[ReplayControls], object]) -> bool:
        """Steer the replay source; its UserErrors (no such level ...) become a notification."""
        if self.replay is None:
            return False
        ok = True
        try:
            call(self.replay)
        except UserError as exc:
            self.notify(str(exc), severity="warning")
            ok = False
        for screen in self.screen_stack:
            if isinstance(screen, ViewScreen) and screen.is_mounted:
                screen.tick_replay()
        return ok

    def action_toggle_pause(self) -> None:
        replay = self.replay
        if replay is None:
            return
        if replay.finished:  # at the end, play means play again
            self._rewind(0.0)
            if replay.speed is not None:
                self._replay_do(lambda r: r.resume())
            return
        self._replay_do(lambda r: r.resume() if r.paused else r.pause())

    def _pause_at_max_speed(self) -> None:
        """At max speed a seek pauses where it lands: playing on would be back at the end before
        the screen showed the target."""
        if self.replay is not None and self.replay.speed is None and not self.replay.paused:
            self._replay_do(lambda r: r.pause())

    def _rewind(self, seconds: float) -> bool:
        self._level_target = None
        self._pause_at_max_speed()
        return self._replay_do(lambda r: r.seek(seconds))

    def action_seek(self, direction: int) -> None:
        # position_s is the pending target while a seek is under way: quick presses add up
        position = float(self.replay.position_s or 0.0) if self.replay is not None else 0.0
        self._rewind(max(0.0, position + direction * SEEK_STEP_S))

    def action_seek_start(self) -> None:
        self._rewind(0.0)

    def action_speed(self, direction: int) -> None:
        current = self.replay.speed if self.replay is not None else 1.0
        index = SPEEDS.index(current) if current in SPEEDS else SPEEDS.index(1.0)
        speed = SPEEDS[min(len(SPEEDS) - 1, max(0, index + direction))]
        self._replay_do(lambda r: r.set_speed(speed))

    def action_seek_level(self, direction: int) -> None:
        # From the level a previous press is still seeking to, not the one on screen: a burst
        # of `]` moves one level per press. Levels are counted by their starts (the replay's
        # seek_level): a level measured again is stepped to once per trial.
        current = self._level_target if self._level_target is not None else self.state.level_starts - 1
        target = max(0, current + direction)
        self._pause_at_max_speed()
        self._level_target = target
        if not self._replay_do(lambda r: r.seek_level(target)):
            self._level_target = None

    def action_step(self) -> None:
        self._replay_do(lambda r: r.step())

    def action_export(self) -> None:
        path = self.recording_path()
        if path is None:
            self.notify("nothing to export: this session is not recorded", severity="warning")
            return
        self.push_screen(ExportDialog(), lambda fmt: self._export(path, fmt) if fmt else None)

    def _export(self, path: Path, fmt: str) -> None:
        def work() -> None:
            try:
                from engine.record.exporters import export
                from engine.record.reader import Recording

                out = export(Recording.open(path), fmt, path.parent)
                self.call_from_thread(self.notify, f"exported {out}", title="export")
            except UserError as exc:
                self.call_from_thread(self.notify, str(exc), title="export failed", severity="error")
            except Exception as exc:  # the report must not take the measurement down with it
                self.call_from_thread(self.notify, f"{type(exc).__name__}: {exc}", title="export failed", severity="error")

        self.run_worker(work, thread=True, exclusive=True, group="export")

    def action_open_recording(self) -> None:
        if self.live_running:
            self.notify("a live session is running: it ends when you quit, and q also leaves the app. Replay a "
                        "recording with: gpuscale-tui replay FILE", severity="warning")
            return
        self.push_screen(OpenRecordingDialog(recording_candidates()), self._open)

    def _open(self, path: Path | None) -> None:
        if path is None:
            return
        if not path.is_file():
            self.notify(f"{path}: no such file", severity="error")
            return
        try:
            source = self.opener(path)
        except UserError as exc:
            self.notify(str(exc), severity="error")
            return
        previous = self.replay
        if previous is not None:
            for s in self.sources:
                if s is cast(object, previous):  # the replay is one of the sources
                    s.stop()
        self.controls = None
        self.attach(source, replay=source)
        self.sub_title = path.name
        self.notify(f"replaying {path.name}")

    # ------------------------------------------------------------------ command palette

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for view in self.shown_views():
            yield SystemCommand(f"View: {view.title}", view.description, partial(self.switch_mode, view.name))
        commands = [
            ("Help", "Keys and what the numbers mean", self.action_help, True),
            ("Start the sweep", "Run the concurrency sweep again", self.action_start_sweep, "start_sweep"),
            ("Stop the sweep", "Stop the running sweep or probe", self.action_cancel_sweep, "cancel_sweep"),
            ("Run the training probe", "DDP/FSDP at 1..N GPUs, all-reduce, topology", self.action_run_probe, "run_probe"),
            ("Export the recording", "JSON, CSV, Markdown or HTML beside the recording", self.action_export, "export"),
            ("Open a recording", "Replay a recorded session", self.action_open_recording, True),
            ("Replay: play / pause", "", self.action_toggle_pause, "toggle_pause"),
            ("Replay: faster", "", lambda: self.action_speed(1), "speed"),
            ("Replay: slower", "", lambda: self.action_speed(-1), "speed"),
            ("Replay: back to the start", "", self.action_seek_start, "seek"),
        ]
        for title, text, callback, when in commands:
            if when is True or self.action_possible(str(when)):
                yield SystemCommand(title, text, callback)


def run_tui(
    source: EventSource,
    *,
    controls: LiveControls | None = None,
    replay: ReplayControls | None = None,
    title: str = "gpuscale-tui",
) -> int:
    """Show ``source`` in the TUI until the user quits or the terminal goes away; then stop the
    source (a live session finalises its recording and stops its server) and return its exit code."""
    app = GpuscaleApp(controls=controls, replay=replay, title=title)
    app.attach(source, replay=replay)
    try:
        app.run()
    finally:
        stuck = app.stop_sources()
    if not app.hung_up:  # with the terminal gone there is nobody to tell
        _tell(stuck, controls)
    return exit_code(app, source)


def exit_code(app: App[int], source: EventSource) -> int:
    """The source's code, but a run left by ctrl+c that otherwise ended well is interrupted (130)."""
    if app.return_code == EXIT_INTERRUPTED and source.exit_code == 0:
        return EXIT_INTERRUPTED
    return source.exit_code


def _tell(stuck: list[EventSource], controls: LiveControls | None) -> None:
    try:
        for source in stuck:
            print(f"gpuscale-tui: {type(source).__name__} did not stop within {JOIN_TIMEOUT_S:.0f} s", file=sys.stderr)
        path = controls.recording_path if controls is not None else None
        if path:
            print(f"recording: {Path(path).resolve()}")
    except OSError:
        pass
