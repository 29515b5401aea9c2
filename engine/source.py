"""An event source feeds a bus from a background thread: a live Session or a replayed recording.

The TUI and the headless printer only ever see a source and its bus, so live and replay share
one rendering path (docs/architecture.md, "The layers").
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod

from engine.bus import EventBus


class EventSource(ABC):
    def __init__(self, bus: EventBus | None = None) -> None:
        self.bus = bus or EventBus()
        self._thread: threading.Thread | None = None
        self.exit_code: int = 0

    @abstractmethod
    def _run(self) -> None:
        """Publish events on self.bus until done or stopped. Runs in the source's thread."""

    @abstractmethod
    def stop(self) -> None:
        """Ask the source to finish soon (idempotent, thread-safe). Live: finalise the session."""

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("source already started")
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """True when the source has finished."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
