"""The typed messages between a sweep (engine/load/pool.py's side) and its load workers,
pickled over each worker's socket pair. A level goes: ``UseTransport`` once per sweep, then per
level ``PrepareLevel`` -> ``Ready``, ``StartAt`` (T0) -> a ``TickReport`` per tick, ``StopLevel``
-> ``Stopped``; ``Exit`` at the sweep's end. ``Fatal`` is a worker's own crash; ``Gone`` is
made by the pool when a worker's socket closes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.load.dev import LoadDev
from engine.load.ticks import LevelPlan, Tick

# --------------------------------------------------------------------------- to a worker


@dataclass(frozen=True)
class UseTransport:
    """The sweep's transport (a module with TRANSPORT) and its prepared payload for this worker."""

    module: str
    payload: object  # the transport's own (engine/net/connection.py, Prepared.payload)
    dev: LoadDev = field(default_factory=LoadDev)


@dataclass(frozen=True)
class PrepareLevel:
    """Open this worker's connections for a level; answered with Ready."""

    plan: LevelPlan


@dataclass(frozen=True)
class StartAt:
    """Start sending at T0 (CLOCK_MONOTONIC nanoseconds)."""

    t0_ns: int


@dataclass(frozen=True)
class StopLevel:
    """End the level now; answered with Stopped."""


@dataclass(frozen=True)
class Exit:
    """The sweep is over: close everything and exit."""


ToWorker = UseTransport | PrepareLevel | StartAt | StopLevel | Exit

# --------------------------------------------------------------------------- from a worker


@dataclass(frozen=True)
class Hello:
    worker: int


@dataclass(frozen=True)
class Ready:
    level_index: int
    connected: int  # connections open
    first_error: str | None  # the first connect error, described
    connect_ns: list[int] = field(default_factory=list)  # each connection's connect time
    kernel_rtt_us: list[int] = field(default_factory=list)  # the kernel's RTT estimate of each


@dataclass(frozen=True)
class TickReport:
    tick: Tick


@dataclass(frozen=True)
class Stopped:
    level_index: int  # -1: no level was prepared


@dataclass(frozen=True)
class Fatal:
    """The worker crashed in one of its own tasks."""

    message: str


@dataclass(frozen=True)
class Gone:
    """The worker's socket closed (it exited): made by the pool, never sent."""

    message: str


FromWorker = Hello | Ready | TickReport | Stopped | Fatal | Gone
