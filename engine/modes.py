"""Load modes: one strategy object per mode behind a typed name.

The profile's ``load.mode`` is a ``LoadMode`` (a StrEnum, equal to its string); events and
recordings carry it as a plain string; ``mode_of`` turns either into the mode's strategy, which
says what differs between the modes: where the profile lists its levels, whether requests go out
on a schedule (open loop) or one after the other's response (closed loop), how many load workers
a level wants, and how a level is named in tables, charts and the CSV. A new mode: a ``LoadMode``
member and a strategy here, its request schedule in engine/load/worker.py and sweep.py's plans.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class PlannedLevels(Protocol):
    """What a mode reads of a profile's load section (engine.profiles.Load): its levels."""

    @property
    def concurrency(self) -> Sequence[int]: ...

    @property
    def rates(self) -> Sequence[float]: ...


class LoadMode(StrEnum):
    """The typed name. A StrEnum: equal to the profile's and the recordings' strings."""

    CONCURRENCY = "concurrency"
    RATE = "rate"


@dataclass(frozen=True)
class ModeStrategy:
    name: LoadMode
    # requests go out on a schedule, not when a response frees a slot: latency is also taken from
    # the intended send time (uncorrected: from the actual send), late sends are audited, the
    # level is a target rate, the workers' timers must be precise
    open_loop: bool
    levels_key: str  # the Load attribute holding the planned levels
    integer_levels: bool  # requests in flight are whole; a rate may be fractional
    per_worker: float  # engine/load/workers_rule.py: how much of a level one worker carries
    heading: str  # a table's level column
    csv_header: str  # perf_analyzer's first CSV column
    axis: str  # lower case, for prose and chart axes
    log2_axis: bool  # levels that double (1, 2, 4, ...) read best on a log2 axis

    def levels(self, load: PlannedLevels) -> list[float]:
        """The planned levels as the profile lists them (concurrency's integers as floats, as
        events carry them; rates as written)."""
        values = list(getattr(load, self.levels_key))
        return [float(x) for x in values] if self.integer_levels else values

    def level_text(self, level: float) -> str:
        """A level in a sentence: "concurrency 8", "250 req/s"."""
        return f"{level:g} req/s" if self.open_loop else f"concurrency {level:g}"

    def workers_wanted(self, level: float, pool: int, fixed: bool, per_worker: float = 0.0) -> int:
        """Workers a level uses: all of a fixed pool, else one per ``per_worker`` (the mode's
        own unless given); a closed-loop level never more than its requests in flight."""
        wanted = pool if fixed else math.ceil(level / (per_worker or self.per_worker))
        if self.integer_levels:
            wanted = min(int(level), wanted)
        return max(1, min(pool, wanted))


CONCURRENCY = ModeStrategy(
    LoadMode.CONCURRENCY, open_loop=False, levels_key="concurrency", integer_levels=True, per_worker=32,
    heading="Concurrency", csv_header="Concurrency", axis="concurrency", log2_axis=True,
)
RATE = ModeStrategy(
    LoadMode.RATE, open_loop=True, levels_key="rates", integer_levels=False, per_worker=5000.0,
    heading="Rate (req/s)", csv_header="Request Rate", axis="rate (req/s)", log2_axis=False,
)
MODES: dict[LoadMode, ModeStrategy] = {m.name: m for m in (CONCURRENCY, RATE)}


def mode_of(name: str | None) -> ModeStrategy:
    """The strategy of a profile's or a recording's mode. Not recorded (None, an older file) or
    not known: concurrency, the profile's default, as the reports always read it."""
    try:
        return MODES[LoadMode(name or "")]
    except ValueError:
        return CONCURRENCY
