"""The seam between a load worker and its connections: what a transport's connection sees of
the scheduler, and what it reports back (engine/load/worker.py is the scheduler; the transports
are under engine/triton/transports/, engine/net/tcp.py opens their sockets).

A ``Dialer`` makes connections and opens them a group at a time. A ``Connection`` carries one
request at a time: ``send`` writes it, and the connection calls the scheduler back once with what
came of it. A worker's connections take the sweep's requests in turn from one ``RequestCycle``: an
index and its increment per request, nothing more on the hot path.

Kept light (standard library only): every load worker imports it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from engine.load.dev import LoadDev
    from engine.load.ticks import LevelPlan


# Error kinds, named by what happened whatever the protocol; the message says it in the protocol's
# words (e.g. "HTTP 400: ..."). Recordings made before these names: engine/events.py maps them.
REJECTED = "rejected"  # the server refused the request (HTTP 4xx: bad input, unknown model)
SERVER_ERROR = "server_error"  # the server failed to serve it (HTTP 5xx)
BAD_RESPONSE = "bad_response"  # an answer we cannot frame (not HTTP, a broken chunk, bytes unasked for)
MALFORMED_ANSWER = "malformed_answer"  # a framed answer that is not the one asked for (engine/triton/answer_check.py)
WRONG_ANSWER = "wrong_answer"  # a well-formed answer whose values differ from the input data's validation_data
RESPONSE_TOO_LARGE = "response_too_large"  # an answer past the sweep's cap on its size: the connection is closed
TIMEOUT = "timeout"
CONNECTION_RESET = "connection_reset"
CONNECTION_REFUSED = "connection_refused"
CONNECT_ERROR = "connect_error"
DROPPED = "dropped"  # rate mode: the worker's in-flight cap was reached, the request was never sent
SEQUENCE_DROPPED = "sequence_dropped"  # a sequence model's step refused: the server no longer held its sequence


class Scheduler(Protocol):
    """What a connection sees of its load worker, and the callbacks it reports through: exactly
    one of answered / rejected / failed / unexpected per request, or lost when it closes."""

    index: int
    generation: int
    plan: LevelPlan | None
    loop: asyncio.AbstractEventLoop
    selector: Any  # worker.PreciseEpollSelector, or None (unread_since: how long an answer waited)
    dev: LoadDev  # developer settings (engine/load/dev.py)

    def answered(self, conn: Connection, close: bool) -> None: ...

    def rejected(self, conn: Connection, kind: str, message: str, close: bool) -> None: ...

    def failed(self, conn: Connection, kind: str, message: str) -> None: ...

    def unexpected(self, conn: Connection, message: str) -> None: ...

    def lost(self, conn: Connection, exc: BaseException | None) -> None: ...


class StreamTimes:
    """One request's stream of responses (a decoupled model's), as a streaming transport saw it:
    when the first response came, the gaps between the next ones, how many there were.

    Responses that share one arrival stamp (one read of several) have no gap of their own: it is
    not measured, left out of ``gaps_ns`` (``reads`` counts the distinct stamps)."""

    __slots__ = ("cached_tokens", "first_ns", "gaps_ns", "input_tokens", "last_ns", "reads", "responses", "tokens",
                 "worded")

    def __init__(self) -> None:
        self.first_ns = 0
        self.gaps_ns: list[int] = []
        self.last_ns = 0
        self.responses = 0
        self.reads = 0  # distinct arrival stamps: responses - reads gaps were not measured
        self.tokens = 0  # output tokens: load.tokens_from's counts, the server's usage, else one per response
        self.input_tokens = -1  # the prompt's tokens as the server counted them (-1: not known)
        self.cached_tokens = -1  # of those, the ones the server took from its prefix cache (-1: not known)
        self.worded = False  # tokens and input_tokens are words: the server reported no usage

    def add(self, now_ns: int, tokens: int = 1) -> None:
        """One more response, arrived at ``now_ns``, carrying ``tokens`` output tokens."""
        if self.responses == 0:
            self.first_ns = now_ns
            self.reads = 1
        elif now_ns != self.last_ns:
            self.gaps_ns.append(now_ns - self.last_ns)
            self.reads += 1
        self.responses += 1
        self.tokens += tokens
        self.last_ns = now_ns


def first_line(exc: BaseException) -> str:
    """An exception as its type and its message's first line: the words of an error line."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200]}" if lines else type(exc).__name__


class Connection:
    """One connection of a load worker, carrying at most one request at a time.

    The scheduler reads and resets ``busy``, ``generation``, ``backoff`` and ``reconnecting``. The transport keeps
    the timings a request's latency is split by: ``send`` sets ``sent_ns`` (now) and
    ``intended_ns`` (the schedule's time, or now); ``written_ns`` when the whole request is in
    the kernel's (or the protocol library's) hands; ``first_ns`` when the answer's first bytes
    were read; ``unread_ns`` how long they may have waited unread (an upper bound); ``own_ns`` the
    time the protocol library took in our hands that the send time does not end (gRPC: starting
    the call; 0 for a transport whose send returns once the bytes are in the kernel's). A transport
    that cannot tell sets written_ns = sent_ns and first_ns = the answer's time. A streaming
    transport keeps the request's ``stream`` (None for a unary one) and reports it answered at
    its final response.
    """

    stream: StreamTimes | None = None
    # a sequence model's request in flight: its step in the sequence (0: the first; -1: not a
    # sequence model's) and whether it ends the sequence
    step: int = -1
    ends_sequence: bool = False

    def __init__(self, scheduler: Scheduler) -> None:
        self.w = scheduler
        self.generation = scheduler.generation
        self.connected = False
        self.busy = False
        self.sent_ns = 0
        self.intended_ns = 0
        self.written_ns = 0
        self.first_ns = 0
        self.unread_ns = 0
        self.own_ns = 0
        self.backoff = 0.0  # the scheduler's reconnect delay
        self.reconnecting = False  # the scheduler has a task reopening it (never two: each would open one)
        # the server closed the socket before reading the request in flight (a keep-alive close
        # that crossed it on the wire): the scheduler sends again on a fresh connection, no error
        self.resend = False

    def send(self, intended_ns: int = 0) -> int:
        """Write one request (the next of the sweep's); returns the send time (monotonic ns). The hot path:
        no allocation beyond what the transport's write needs."""
        raise NotImplementedError

    def abort(self) -> None:
        """Close at once; ``Scheduler.lost`` follows if it was open."""
        raise NotImplementedError

    def check(self) -> str | None:
        """Called once per level, within ``answered`` for the level's first counted answer: a
        one-line problem with it (outputs missing), or None. For a transport that does not
        check every answer itself (the HTTP ones do, and count MALFORMED_ANSWER)."""
        return None


class Dialer:
    """A load worker's side of a transport for one sweep: makes and opens its connections."""

    def connection(self) -> Connection:
        raise NotImplementedError

    async def open(self, conns: list[Connection], at_ns: int) -> BaseException | None:
        """Open ``conns`` as close together as the transport can (not before ``at_ns`` when it
        is not 0), within the plan's timeout; those left unconnected failed. Returns the first
        failure, or None. Never raises for a failure to connect."""
        raise NotImplementedError

    def level_ends(self) -> None:
        """The level ends: its connections are aborted next (then ``forget``)."""

    def forget(self) -> None:
        """The level ended: drop what was learnt for it (resolved addresses)."""

    async def settle(self) -> None:
        """Before the worker exits: the answers its last level left to come are in (or given up)."""

    def path_figures(self) -> tuple[list[int], list[int]]:
        """Per connection opened this level: connect times (ns) and the kernel's RTT estimates
        (µs); empty where the transport does not measure them."""
        return [], []


GOLDEN = 0.6180339887498949  # spreads the workers' first requests over the list, whatever their number


def first_request(worker: int, count: int) -> int:
    """Where worker number ``worker`` starts in a list of ``count`` requests: far from the other
    workers' starts (a golden-ratio sequence), so that even a short level sends every entry."""
    return int(worker * GOLDEN * count) % count if count > 1 else 0


class RequestCycle:
    """A load worker's place in the sweep's requests: each ``take`` is the next one's index."""

    __slots__ = ("count", "next")

    def __init__(self, count: int, worker: int) -> None:
        self.count = max(1, count)
        self.next = first_request(worker, self.count)

    def take(self) -> int:
        i = self.next
        self.next = i + 1 if i + 1 < self.count else 0
        return i


def connect_error_kind(exc: BaseException | None) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return CONNECTION_REFUSED
    if isinstance(exc, ConnectionResetError):
        return CONNECTION_RESET
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return TIMEOUT
    return CONNECT_ERROR


def describe(exc: BaseException | None) -> str:
    """One short line for an exception (None: the peer closed)."""
    if exc is None:
        return "closed by the server"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]
