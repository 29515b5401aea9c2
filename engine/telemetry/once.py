"""Warnings that reach the user once per problem, not once per sample."""

from __future__ import annotations

import threading
from collections.abc import Callable

from engine.events import Event, Warning

SOURCE = "telemetry"


class WarnOnce:
    """Publishes a Warning the first time a key is seen; later warnings with that key are
    dropped until ``rearm(key)`` (a problem that went away and may come back)."""

    def __init__(self, publish: Callable[[Event], None]) -> None:
        self._publish = publish
        self._seen: set[str] = set()
        self._lock = threading.Lock()  # the sampler's threads share one instance

    def __call__(self, key: str, message: str) -> bool:
        with self._lock:
            if key in self._seen:
                return False
            self._seen.add(key)
        self._publish(Warning(source=SOURCE, message=message, key=key))
        return True

    def rearm(self, key: str) -> None:
        with self._lock:
            self._seen.discard(key)

    def active(self, key: str) -> bool:
        with self._lock:
            return key in self._seen
