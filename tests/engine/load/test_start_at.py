"""load.start_at: the sweep's first level waits, everything prepared, for one wall-clock instant
(several load hosts begin together); an instant already past starts at once and says so; a stop
ends the wait."""

from __future__ import annotations

import asyncio
import time

from engine.events import Event, PhaseChanged, Warning
from engine.load.sweep import _start_at


def test_the_sweep_waits_for_the_instant() -> None:
    got: list[Event] = []
    instant = time.time() + 0.3
    asyncio.run(_start_at(instant, got.append, asyncio.Event()))
    assert time.time() >= instant  # never before it
    assert [type(e) for e in got] == [PhaseChanged, PhaseChanged]
    assert got[0].detail.startswith("waiting ") and got[1].detail == "started at load.start_at"  # type: ignore[attr-defined]


def test_an_instant_already_past_starts_at_once_and_says_so() -> None:
    got: list[Event] = []
    asyncio.run(_start_at(time.time() - 5, got.append, asyncio.Event()))
    (warning,) = got
    assert isinstance(warning, Warning) and warning.message.startswith("load.start_at was ")
    assert "the sweep starts at once" in warning.message


def test_no_instant_no_wait_and_a_stop_ends_the_wait() -> None:
    got: list[Event] = []
    asyncio.run(_start_at(0.0, got.append, asyncio.Event()))
    assert got == []

    async def stopped() -> None:
        stop = asyncio.Event()
        stop.set()
        await _start_at(time.time() + 3600, got.append, stop)  # returns on the stop, not in an hour

    asyncio.run(asyncio.wait_for(stopped(), 60))
    assert [type(e) for e in got] == [PhaseChanged]
