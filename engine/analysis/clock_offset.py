"""A host's clock against the head's, NTP-style: from ping-pong exchanges, the one with the
shortest round trip gives the offset (its error is at most half that round trip)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Exchange:
    """One ping-pong, in ns: the head asks at ``sent`` (head's clock), the host answers with
    its clock's ``remote``, the head hears it at ``received`` (head's clock)."""

    sent: int
    remote: int
    received: int

    @property
    def rtt_ns(self) -> int:
        return self.received - self.sent

    @property
    def offset_ns(self) -> float:
        """The host's clock minus the head's, were the two legs equal."""
        return self.remote - (self.sent + self.received) / 2


@dataclass(frozen=True)
class ClockOffset:
    offset_ns: float  # the host's clock minus the head's
    rtt_ns: int  # of the exchange it rests on: |error| <= rtt_ns / 2
    exchanges: int

    def to_head(self, host_ns: float) -> float:
        """A time read on the host's clock, on the head's."""
        return host_ns - self.offset_ns


def clock_offset(exchanges: Sequence[Exchange]) -> ClockOffset:
    """The offset from the exchange with the least round trip (raises ValueError without one)."""
    usable = [e for e in exchanges if e.rtt_ns >= 0]
    if not usable:
        raise ValueError("no clock exchange to measure from")
    best = min(usable, key=lambda e: e.rtt_ns)
    return ClockOffset(best.offset_ns, best.rtt_ns, len(usable))
