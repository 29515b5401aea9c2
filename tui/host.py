"""What a view needs of the app that shows it, and what the app needs of the live session and of
a replay, as Protocols: the screens and the view widgets read the app through ViewHost, so they
never import the app (the app imports them); the app steers a Session or a ReplaySource through
LiveControls and ReplayControls, so it never imports the engine's sources."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from tui.state import SessionState
from tui.study_state import StudyState


class LiveControls(Protocol):
    """The live session as the app steers it (engine/session.Session)."""

    @property
    def recording_path(self) -> Path | None: ...

    @property
    def busy(self) -> bool:
        """A sweep or the probe is running."""
        ...

    def on_busy(self, listener: Callable[[bool], object]) -> Callable[[], None]:
        """Call ``listener(busy)`` (from any thread) when a job starts or ends; returns the unsubscribe."""
        ...

    def request_sweep(self) -> None: ...
    def cancel_sweep(self) -> None: ...
    def request_probe(self) -> None: ...


class ReplayControls(Protocol):
    """A replay source as the app steers it (engine/record/replay_source.ReplaySource)."""

    @property
    def path(self) -> Path | None: ...
    @property
    def position_s(self) -> float: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def paused(self) -> bool: ...
    @property
    def speed(self) -> float | None:
        """None: as fast as it can."""
        ...
    @property
    def finished(self) -> bool: ...

    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def set_speed(self, speed: float | None) -> None: ...
    def seek(self, seconds_from_start: float) -> None: ...
    def seek_level(self, index: int) -> None: ...
    def step(self) -> None: ...


class ViewHost(Protocol):
    state: SessionState  # the session shown, folded from its events
    study: StudyState | None  # a study's own state; None outside a study
    replay: ReplayControls | None  # the replay source, when replaying
    controls: LiveControls | None  # the live session, when live

    def recording_path(self) -> Path | None:
        """The recording this session writes or replays; None when it is not recorded."""
        ...
