"""A sequence model's requests on the load worker's side (Triton's sequence batcher): each
connection carries one sequence at a time, step after step, as perf_analyzer's contexts do, so a
concurrency level is the number of sequences in flight.

The requests are encoded once in the session with three fixed-width slots in their JSON header
(``sequence_id``, ``sequence_start``, ``sequence_end``: KServe v2's request parameters, which
Triton maps to the control inputs the model's config names); a send copies the request's head up
to its last slot, writes the step's values into it, and writes the rest as it is. A sequence
whose step failed is started again under its id (START set), and so are those a level's end left
unfinished, by the next level's connections: a START on a live id takes its slot in Triton at
once, where a new id waits for a free slot until the idle timeout frees one
(docs/results/sequence_models_cpu.md has the measurement).

Over gRPC the same three go as ``ModelInferRequest.parameters`` entries placed first in the
message, the id a 10-byte varint (protobuf parsers take a varint padded with continuation bytes)
and each flag one byte, so a step's message is as long as every other's.

Sequence ids: ``SequencePlan.id_base`` (the host's rank) + the worker's index << 32 + a counter of
the worker's sequences, so no two workers or hosts share one. Standard library only: load
workers import it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.net.connection import RequestCycle

ID_WIDTH = 20  # digits of the largest uint64; the slot is padded with spaces (JSON whitespace)
FLAG_WIDTH = 5  # "true " or "false"
WORKER_SHIFT = 32  # the worker's index above its sequence counter
RANK_SHIFT = 48  # the host's rank above the worker's index (ids stay below 2**63)
DROPPED_TEXT = "must specify the START flag"  # Triton's words for a step of a sequence it no longer holds


VARINT_WIDTH = 10  # the longest varint: any id fits the same slot


def id_slot(sequence_id: int) -> bytes:
    return str(sequence_id).ljust(ID_WIDTH).encode()


def flag_slot(value: bool) -> bytes:
    return b"true " if value else b"false"


def varint_slot(value: int) -> bytes:
    """``value`` as a protobuf varint of exactly VARINT_WIDTH bytes (continuation bits padding it)."""
    out = bytearray((value >> (7 * k)) & 0x7F | 0x80 for k in range(VARINT_WIDTH))
    out[-1] &= 0x7F
    return bytes(out)


def _proto_entry(key: bytes, value: bytes) -> bytes:
    """One ``parameters`` map entry of ModelInferRequest (field 4): key (1), InferParameter (2)."""
    entry = b"\x0a" + bytes([len(key)]) + key + b"\x12" + bytes([len(value)]) + value
    return b"\x22" + bytes([len(entry)]) + entry


# the gRPC message's first fields: the id as int64_param (field 2), the flags as bool_param (field 1)
PROTO_ID = _proto_entry(b"sequence_id", b"\x10" + varint_slot(0))
PROTO_START = _proto_entry(b"sequence_start", b"\x08\x00")
PROTO_END = _proto_entry(b"sequence_end", b"\x08\x00")
PROTO_PARAMETERS = PROTO_ID + PROTO_START + PROTO_END
PROTO_SLOTS = (len(PROTO_ID) - VARINT_WIDTH, len(PROTO_ID) + len(PROTO_START) - 1, len(PROTO_PARAMETERS) - 1)


@dataclass(frozen=True)
class SequencePlan:
    """What every worker needs to walk the sweep's requests as sequences."""

    # per request: offsets in its bytes of the id, start and end slots
    slots: tuple[tuple[int, int, int], ...]
    # input data streams: (first request, steps) per stream, the requests of a stream consecutive;
    # empty: every sequence takes the next requests in turn, its length drawn as below
    streams: tuple[tuple[int, int], ...] = ()
    length: int = 20  # load.sequence_length
    variation: float = 20.0  # load.sequence_length_variation, percent either side
    id_base: int = 0  # the host's rank << RANK_SHIFT
    idle_us: int = 0  # the config's max_sequence_idle_microseconds (0: Triton's default), for error lines
    proto: bool = False  # the slots are a gRPC message's (varint, one-byte flags), not JSON text


class Sequences:
    """One worker's sequences: the ids it has given and where its streams stand (its connections
    share it)."""

    def __init__(self, plan: SequencePlan, worker: int, cycle: RequestCycle) -> None:
        self.plan = plan
        self.cycle = cycle  # the worker's place in the requests (no streams) or in the streams
        self.counter = 0
        self.base = plan.id_base + (worker << WORKER_SHIFT) + 1  # perf_analyzer starts at 1 too
        self.rng = random.Random(worker)  # lengths differ between workers, the same every run
        lo = max(1, round(plan.length * (1 - plan.variation / 100)))
        hi = max(lo, round(plan.length * (1 + plan.variation / 100)))
        self.bounds = (lo, hi)
        self.cursors: list[SequenceCursor] = []  # this level's connections'
        self.unfinished: list[int] = []  # ids a level's end left mid-sequence: the next level restarts them

    def start(self, again: int = 0) -> tuple[int, int, int]:
        """A new sequence: (its id, its first request, its steps); ``again``: an id to start
        afresh (its step failed), else one a level left unfinished, else a new one."""
        if again:
            sequence_id = again
        elif self.unfinished:
            sequence_id = self.unfinished.pop()
        else:
            self.counter += 1
            sequence_id = self.base + self.counter - 1
        if self.plan.streams:
            first, steps = self.plan.streams[self.cycle.take()]
            return sequence_id, first, steps
        return sequence_id, -1, self.rng.randint(*self.bounds)

    def reclaim(self) -> None:
        """The level ended, its connections closed: the ids of their unfinished sequences go to
        the next level's connections."""
        self.unfinished.extend(c.id for c in self.cursors if c.unfinished)
        self.cursors.clear()


class SequenceCursor:
    """Where one connection is in its sequence; ``next`` gives the request to send and patches
    its head."""

    __slots__ = ("answered", "first", "id", "last", "seen", "sequences", "step", "steps")

    def __init__(self, sequences: Sequences) -> None:
        self.sequences = sequences
        self.id = 0
        self.first = -1  # streams: the sequence's first request
        self.steps = 0
        self.step = -1  # the step in flight (0: the sequence's first)
        self.last = False  # the step in flight ends its sequence
        self.answered = 0  # answers counted good by the connection
        self.seen = 0  # ``answered`` when the step in flight was sent
        sequences.cursors.append(self)

    @property
    def unfinished(self) -> bool:
        """A sequence started whose last step was not answered."""
        return self.step >= 0 and not (self.last and self.answered > self.seen)

    def advance(self) -> None:
        """Move to the next step; a new sequence after the last, the same id started again after
        a step that failed."""
        failed = self.step >= 0 and self.answered == self.seen
        if self.step < 0 or failed or self.last:
            self.id, self.first, self.steps = self.sequences.start(self.id if failed else 0)
            self.step = 0
        else:
            self.step += 1
        self.last = self.step + 1 >= self.steps
        self.seen = self.answered

    def request(self) -> int:
        """The index of the request the step sends."""
        if self.first >= 0:
            return self.first + self.step
        return self.sequences.cycle.take()

    def head(self, raw: bytes, slots: tuple[int, int, int]) -> bytearray:
        """The request's bytes up to its last slot, with this step's values written in."""
        at_id, at_start, at_end = slots
        if self.sequences.plan.proto:
            head = bytearray(raw[: at_end + 1])
            head[at_id : at_id + VARINT_WIDTH] = varint_slot(self.id)
            head[at_start] = self.step == 0
            head[at_end] = self.last
            return head
        head = bytearray(raw[: at_end + FLAG_WIDTH])
        head[at_id : at_id + ID_WIDTH] = id_slot(self.id)
        head[at_start : at_start + FLAG_WIDTH] = flag_slot(self.step == 0)
        head[at_end : at_end + FLAG_WIDTH] = flag_slot(self.last)
        return head


def dropped_line(message: str, sequence_id: int, idle_us: int) -> str:
    """Triton's refusal of a step whose sequence it dropped, said as what happened."""
    idle = f"{idle_us} µs" if idle_us else "Triton's default"
    return (f"Triton dropped sequence {sequence_id} before its end (idle past max_sequence_idle_microseconds = "
            f"{idle}, or its slot was taken): {message}")
