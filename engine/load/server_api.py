"""The seam between the load engine and a server's inference API: what a sweep
(engine/load/sweep.py, ``run_sweep``) needs of the server it measures, and nothing more.

The load engine owns levels, ticks, workers, windows and trials; the API owns everything that
names its protocol. Triton's KServe v2 is the first implementation (engine/triton/api.py,
``TritonApi``); adding another is docs/architecture.md, Recipes, "A server API". The parts:

- describing the target: ``model``, ``decoupled`` (it answers a request with a stream of
  responses) and its ``endpoints`` (a sweep spread over several servers binds each load worker
  to one);
- the transports it offers: ``transport`` checks load.transport against the model and names the
  module each load worker imports (its ``TRANSPORT``: engine/net/connection.py says what a
  transport's connections do);
- preparing requests from inputs: ``requests`` makes the sweep's requests once (from load.data,
  load.input_data or synthetic prompts), ``prepare`` encodes them for the transport, once per
  endpoint;
- server statistics: ``stats``, read at window edges to split a window's latency into the
  server's parts; None where the API has no such thing (the levels then carry no breakdown);
- the server's cache: ``cache``, an LLM server's prefix- and KV-cache counters read at the same
  edges (deltas per window and level); None where the API has none (not measured);
- checking an answer: each transport checks the answers it reads against what was asked, on the
  workers' hot path, and reports a bad one by its kind (MALFORMED_ANSWER, WRONG_ANSWER,
  RESPONSE_TOO_LARGE in engine/net/connection.py), which fails the level;
- the path and the server's health: ``round_trip`` before each level, ``wait_ready`` after a
  level that lost the server.

Standard library only, and no import of an API's modules: contracts in pyproject.toml hold it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import asyncio

    from engine.events import Event, ServerBreakdown, ServerCache
    from engine.profiles import Load

Publish = Callable[["Event"], None]


class Endpoint(Protocol):
    """One server of the target, in the words a level's per-endpoint result uses."""

    @property
    def name(self) -> str: ...  # "ep1", ...

    @property
    def http_url(self) -> str: ...  # where it listens (a local one's CPU is told apart by its port)


class Prepared(Protocol):
    """A sweep's requests, as every load worker receives them, and what to undo at its end."""

    @property
    def payload(self) -> Any: ...  # handed (pickled) to the transport's dialer in each worker

    @property
    def request_bytes(self) -> int: ...  # what one request puts on the wire (the workers rule weighs it)

    async def close(self) -> None: ...  # never raises (runs in finally)


class ServerStats(Protocol):
    """The server's own counters, read at the edges of each window."""

    async def snapshot(self, endpoint: int, timeout_s: float) -> object | None:
        """Endpoint number ``endpoint``'s counters now; None when it did not give them in time."""
        ...

    def in_time(self, snapshot: object | None, boundary_ns: int, interval_ns: int) -> bool:
        """Whether ``snapshot`` was read close enough to the window edge ``boundary_ns`` (monotonic)
        to stand for it."""
        ...

    def breakdown(self, before: Sequence[object], after: Sequence[object],
                  client_mean_s: float | None) -> ServerBreakdown | None:
        """The server's per-request times between two edges, over the endpoints given (each one's
        snapshot at both edges, in the same order), summed as one server's."""
        ...


class CacheStats(Protocol):
    """An LLM server's cache counters (its /metrics), read at the edges of each window."""

    async def snapshot(self, timeout_s: float) -> object | None:
        """The counters now; None when the server did not give them in time, or has none."""
        ...

    def between(self, before: object | None, after: object | None) -> ServerCache | None:
        """The cache over the interval between two snapshots; None when either is missing."""
        ...

    def served_before(self, snapshot: object | None) -> bool | None:
        """Whether the server had taken any prompt before ``snapshot`` (None: not known)."""
        ...

    async def reset(self, timeout_s: float) -> str | None:
        """Empty the server's prefix cache (load.cache_reset); None when done, else why not."""
        ...


class ServerApi(Protocol):
    """What ``run_sweep`` measures: one model behind one or more servers of one inference API."""

    # -- describing the target

    @property
    def model(self) -> str: ...

    @property
    def decoupled(self) -> bool:
        """The model answers a request with a stream of responses (its server time is not split)."""
        ...

    def endpoints(self) -> Sequence[Endpoint]: ...

    # -- the transports it offers

    def transport(self, load: Load) -> str:
        """load.transport checked against the model (and load.tokens_from against its outputs):
        the dotted path of the module each load worker imports. Raises UserError, before any
        load, for a transport it does not offer or one that cannot carry this model."""
        ...

    # -- preparing requests from inputs

    async def requests(self, load: Load, publish: Publish, stop: asyncio.Event) -> Sequence[object]:
        """The sweep's requests, made once (what they hold is the API's: its transport encodes
        them); announces what it read and warns through ``publish``. Empty when ``stop`` was set
        meanwhile. Raises UserError for inputs the model cannot take."""
        ...

    async def prepare(self, load: Load, requests: Sequence[object], gpus: tuple[int, ...]) -> Sequence[Prepared]:
        """The requests encoded for load.transport, one Prepared per endpoint in ``endpoints()``'s
        order; on a failure, what was prepared is undone and the UserError names the endpoint."""
        ...

    # -- server statistics

    @property
    def stats(self) -> ServerStats | None: ...

    @property
    def cache(self) -> CacheStats | None: ...

    @property
    def trace_times(self) -> Sequence[float] | None:
        """The requests' timestamps (seconds) where ``requests`` read a trace (load.arrival =
        "trace" replays its gaps); None where they did not."""
        ...

    # -- the path and the server's health

    @property
    def round_trip_method(self) -> str:
        """How ``round_trip`` measures, in a report's words."""
        ...

    async def round_trip(self) -> float | None:
        """The round trip to the server as a request sees it (seconds), measured before a level on
        a fresh connection; None when it could not be measured."""
        ...

    async def wait_ready(self, endpoint: int, stop: asyncio.Event, timeout_s: float) -> float | None:
        """Seconds until endpoint number ``endpoint`` is ready again; None on timeout or stop."""
        ...
