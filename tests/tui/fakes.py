"""Small fakes of the app's collaborators (tui/host.py's LiveControls and ReplayControls) for pilot tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from engine.events import Event
from engine.source import EventSource


class ListSource(EventSource):
    """Publishes a fixed list of events from its thread, then waits until stopped."""

    def __init__(self, events: list[Event], delay_s: float = 0.0, exit_code: int = 0, linger: bool = True) -> None:
        super().__init__()
        self.events = events
        self.delay_s = delay_s
        self.final_exit_code = exit_code
        self.linger = linger
        self.stopped = threading.Event()
        self.stop_calls = 0

    def _run(self) -> None:
        for event in self.events:
            if self.stopped.wait(self.delay_s) if self.delay_s else self.stopped.is_set():
                break
            self.bus.publish(event)
        if self.linger:
            self.stopped.wait(30.0)  # like a live session: runs until stopped (bounded)
        self.exit_code = self.final_exit_code

    def stop(self) -> None:
        self.stop_calls += 1
        self.stopped.set()


class FakeControls:
    """Records what the TUI asked the live session to do."""

    def __init__(self, recording_path: Path | None = None) -> None:
        self.calls: list[str] = []
        self._busy = True
        self._listeners: list[Callable[[bool], object]] = []
        self.recording_path = recording_path

    @property
    def busy(self) -> bool:
        return self._busy

    @busy.setter
    def busy(self, busy: bool) -> None:
        """As a session does when a job starts or ends: the listeners hear of it."""
        self._busy = busy
        for listener in list(self._listeners):
            listener(busy)

    def on_busy(self, listener: Callable[[bool], object]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def request_sweep(self) -> None:
        self.calls.append("sweep")

    def cancel_sweep(self) -> None:
        self.calls.append("cancel")

    def request_probe(self) -> None:
        self.calls.append("probe")

    def stop(self) -> None:
        self.calls.append("stop")


class FakeReplay(ListSource):
    """A replay source: records control calls, holds the position the TUI reads back."""

    def __init__(self, events: list[Event], duration_s: float = 120.0, path: Path | None = None) -> None:
        super().__init__(events)
        self.calls: list[tuple] = []
        self.position_s = 0.0
        self.duration_s = duration_s
        self.paused = False
        self.speed: float | None = 1.0
        self.finished = False
        self.path = path

    def pause(self) -> None:
        self.calls.append(("pause",))
        self.paused = True

    def resume(self) -> None:
        self.calls.append(("resume",))
        self.paused = False

    def set_speed(self, speed: float | None) -> None:
        self.calls.append(("speed", speed))
        self.speed = speed

    def seek(self, seconds: float) -> None:
        self.calls.append(("seek", seconds))
        self.position_s = seconds

    def seek_level(self, index: int) -> None:
        self.calls.append(("seek_level", index))

    def step(self) -> None:
        self.calls.append(("step",))
