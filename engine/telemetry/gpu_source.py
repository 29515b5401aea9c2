"""What the sampler asks of a place GPU readings come from (NVML, Triton's /metrics; DCGM or
rocm-smi next), and what it gives one in return.

A source is opened once, read every ``interval_s`` and closed at stop, all on its own thread
(every call may block). Each read becomes a GpuSample whose ``source`` is the source's name.
Sources are found through the registry (engine/telemetry/registry.py), never by name.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from engine.events import Event, GpuReading
from engine.telemetry.once import WarnOnce

Identity = dict[str, tuple[int | None, str | None]]  # GPU uuid -> (index, name)


@dataclass(frozen=True)
class TelemetrySettings:
    """What the session asked telemetry for; each source's factory reads the part it needs.
    A source with a setting of its own adds a field here."""

    nvml_interval_s: float
    use_nvml: bool
    metrics_url: str | None  # Triton's /metrics; None: not polled
    metrics_headers: dict[str, str] | None
    metrics_interval_s: float  # the server's --metrics-interval-ms / 1000
    # several servers: (endpoint name, its /metrics URL) each, read instead of metrics_url
    metrics_endpoints: tuple[tuple[str, str], ...] = ()


class GpuIdentity:
    """Index and name of each GPU, offered by the sources that enumerate local GPUs (NVML) to
    those that only know a UUID (Triton's /metrics). Ready once every enumerating source has
    opened, whatever came of it."""

    def __init__(self, enumerators: int) -> None:
        self._lock = threading.Lock()
        self._known: Identity = {}
        self._pending = enumerators
        self._ready = threading.Event()
        if enumerators <= 0:
            self._ready.set()

    def offer(self, known: Identity) -> None:
        with self._lock:
            self._known.update(known)

    def opened(self) -> None:
        """One enumerating source has opened (or failed to)."""
        with self._lock:
            self._pending -= 1
            if self._pending <= 0:
                self._ready.set()

    def wait(self, timeout_s: float, stop: threading.Event) -> None:
        """Until ready, ``timeout_s`` passed or the sampler stops."""
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(0.05) and time.monotonic() < deadline and not stop.is_set():
            pass

    def get(self) -> Identity:
        with self._lock:
            return dict(self._known)


@dataclass
class SourceContext:
    """Handed to ``GpuSource.open``: how a source speaks besides its readings."""

    publish: Callable[[Event], None]  # other events (NVML's Topology)
    warn: WarnOnce  # one Warning per problem, not one per sample
    identity: GpuIdentity = field(default_factory=lambda: GpuIdentity(0))
    stop: threading.Event = field(default_factory=threading.Event)  # set when the sampler stops


class GpuSource(Protocol):
    """One place GPU readings come from. Subclass it (for the defaults) or match it."""

    name: str  # GpuSample.source and GpuReading.source; also its thread's and warnings' key
    interval_s: float  # the sampler reads it this often (at least MIN_INTERVAL_S)
    read_at_start: bool = False  # publish a read right after open: absolute gauges need no baseline
    read_at_stop: bool = False  # one more read when stopped: cumulative counters (energy) end late
    enumerates_gpus: bool = False  # offers index and name through SourceContext.identity

    def open(self, ctx: SourceContext) -> bool:
        """Set up (blocking is fine). False: nothing to read here; it has warned why."""
        ...

    def read(self) -> list[GpuReading] | None:
        """This interval's readings; None: nothing to publish this time."""
        ...

    def close(self) -> None:
        """Release what open took; called once, after open, whatever it returned."""
        return None


SourceFactory = Callable[[TelemetrySettings], "GpuSource | None"]  # None: not asked for this run


class GpuSourceRegistry:
    """Name -> factory, in registration order. The sampler asks every factory for a source."""

    def __init__(self) -> None:
        self._factories: dict[str, SourceFactory] = {}

    def register(self, name: str, factory: SourceFactory) -> None:
        if name in self._factories:
            raise ValueError(f"a GPU source named {name!r} is already registered")
        self._factories[name] = factory

    def unregister(self, name: str) -> None:
        self._factories.pop(name, None)

    def names(self) -> list[str]:
        return list(self._factories)

    def sources(self, settings: TelemetrySettings) -> list[GpuSource]:
        """The sources this run asked for, in registration order."""
        made = (factory(settings) for factory in self._factories.values())
        return [source for source in made if source is not None]
