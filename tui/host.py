"""What a view needs of the app that shows it, as a Protocol: the screens and the view widgets
read the app through it, so they never import the app (the app imports them)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from tui.state import SessionState
from tui.study_state import StudyState


class ViewHost(Protocol):
    state: SessionState  # the session shown, folded from its events
    study: StudyState | None  # a study's own state; None outside a study
    replay: object | None  # the replay source, when replaying
    controls: object | None  # the live session, when live

    def recording_path(self) -> Path | None:
        """The recording this session writes or replays; None when it is not recorded."""
        ...
