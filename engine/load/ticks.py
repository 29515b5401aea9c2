"""A level's plan for one load worker and the ticks it sends back (carried by the messages of
engine/load/worker_messages.py).

A level's clock starts at T0 on CLOCK_MONOTONIC (the same clock in every process on Linux).
Each worker buckets what completes into ticks ``[T0 + k*tick, T0 + (k+1)*tick)`` by completion
time and sends one ``Tick`` per tick, empty ones included, so the session always knows how far
every worker has got. Windows are made of whole ticks.

Samples travel as ``array('q')`` (int64 nanoseconds), not numpy: the workers do not import
numpy (a tenth of a second or more of CPU per process start); the session reads them with
np.asarray.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

TICK_NS = 250_000_000  # 250 ms: the resolution of window boundaries
LATE_SEND_NS = 1_000_000  # rate mode: a send more than 1 ms after its intended time is late
MESSAGES_PER_KIND = 3  # distinct error messages kept per kind per tick


@dataclass
class LevelPlan:
    level_index: int
    mode: str  # "concurrency" or "rate"
    tick_ns: int
    timeout_ns: int
    slots: int = 0  # concurrency mode: requests this worker keeps in flight
    rate: float = 0.0  # rate mode: this worker's share, requests/s
    arrival: str = "constant"  # engine/load/arrivals.py
    burstiness: float = 1.0  # arrival "gamma": the gaps' gamma shape
    trace: tuple[float, ...] = ()  # arrival "trace": each request's gap over the mean (engine/load/arrivals.py)
    trace_start: int = 0  # arrival "trace": the request this worker starts at
    think_ns: int = 0  # concurrency mode: each user's pause between an answer and its next request
    phase_ns: int = 0  # rate mode: offset of this worker's schedule (interleaves workers)
    seed: int = 0
    max_in_flight: int = 0  # rate mode: cap of this worker's open requests
    preopen: int = 0  # rate mode: connections opened before T0
    open_at_ns: int = 0  # monotonic instant the workers' connection groups start from (0: at once)


@dataclass
class Tick:
    worker: int
    level_index: int
    tick: int
    ok: int = 0
    latency_ns: array = field(default_factory=lambda: array("q"))
    # rate mode: the same requests measured from their actual send (closed-loop view)
    latency_uncorrected_ns: array | None = None
    errors: dict[str, int] = field(default_factory=dict)
    messages: dict[str, list[str]] = field(default_factory=dict)
    sent: int = 0
    late: int = 0
    cpu_ns: int = 0  # the worker process's CPU time (user + system) during the tick
    wait_ns: int | None = None  # time it was runnable but waiting for a CPU (Linux schedstat)
    lag_ns: array = field(default_factory=lambda: array("q"))  # event-loop lag samples
    # per successful request, where its time went (transport.Connection's timings): handing the
    # request over, waiting for the first byte of the answer, and our side (the answer unread in
    # our socket, reading it, sending late in rate mode): see worker.PreciseEpollSelector.unread_since
    write_ns: array = field(default_factory=lambda: array("q"))
    server_wait_ns: array = field(default_factory=lambda: array("q"))
    client_ns: array = field(default_factory=lambda: array("q"))
    in_flight: int = 0  # requests in flight when the tick was flushed
    # a streaming transport's requests (None: a unary one), per successful request: time to the
    # first response, responses, the time from the first to the final; and every gap between responses
    ttft_ns: array | None = None
    responses: array | None = None
    decode_ns: array | None = None
    itl_ns: array | None = None
    tokens: array | None = None  # output tokens per request (load.tokens_from; else its responses)
    reads: array | None = None  # distinct arrival stamps per request (None: every gap measured)
    input_tokens: array | None = None  # the prompt's tokens per request as the server counted them (-1: unknown)
    cached_tokens: array | None = None  # of those, from the server's prefix cache (its usage; -1: unknown)
    worded: int = 0  # requests whose token counts are words: the server reported no usage
    # a sequence model's requests (None: not one), per successful request: 1 for a sequence's
    # first step, 0 for a later one; and the sequences whose last step was answered
    first_step: array | None = None
    sequences: int = 0

    @property
    def completed(self) -> int:
        return self.ok + sum(self.errors.values())
