"""Fan-out of events from the engines to their consumers (recorder, TUI, headless printer, a
study forwarding its sessions' events).

``publish`` calls each subscriber in turn, in order, on the publisher's thread, so a subscriber
must return quickly and never block: the recorder and the headless printer queue each event to
a writer thread, the TUI appends it to an inbox its timer drains. A subscriber that raises is
detached and named in a Warning event to the others, so one broken consumer cannot stop a
measurement.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from engine.events import Event, Warning

Subscriber = Callable[[Event], None]


class EventBus:
    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        with self._lock:
            self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            with self._lock:
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)

        return unsubscribe

    def publish(self, event: Event) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        broken: list[tuple[Subscriber, BaseException]] = []
        for subscriber in subscribers:
            try:
                subscriber(event)
            except Exception as exc:  # a consumer's bug must not end the measurement
                broken.append((subscriber, exc))
        for subscriber, error in broken:
            with self._lock:
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)
            name = getattr(subscriber, "__qualname__", repr(subscriber))
            self.publish(Warning(source="bus", message=f"consumer {name} failed and was detached: {error!r}"))
