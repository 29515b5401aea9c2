"""A toy server API, for tests/engine/load/test_server_api_recipe.py: what a second inference API
(not Triton's KServe v2) brings to the load engine's seam (engine/load/server_api.py), and nothing
more. Its protocol ("shout"), one line each way over TCP:

- a request: ``<model> <text>\\n``; the answer: ``OK <TEXT>\\n`` (the text in upper case) or
  ``NO <why>\\n``;
- a health probe: ``?\\n``, answered ``READY\\n``.

``ShoutApi`` is the seam's side (describing the target, its one transport, the requests made
from its inputs, no server statistics, the probes); ``TRANSPORT`` is what each load worker imports
(connections that frame an answer and check it: a wrong one is WRONG_ANSWER); ``ShoutServer``
serves the protocol, and may answer wrongly on demand.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from engine.errors import UserError
from engine.net.connection import (
    BAD_RESPONSE,
    REJECTED,
    WRONG_ANSWER,
    Connection,
    Dialer,
    RequestCycle,
    Scheduler,
)
from engine.net.tcp import TcpDialer

monotonic_ns = time.monotonic_ns
NAME = "shout"  # the one transport this API offers (load.transport)


# -- the load workers' side: the transport


@dataclass
class ShoutPayload:
    host: str
    port: int
    requests: list[bytes]  # each request's line, encoded once
    answers: list[bytes]  # each request's right answer line


class ShoutConnection(Connection, asyncio.Protocol):
    def __init__(self, scheduler: Scheduler, payload: ShoutPayload, cycle: RequestCycle) -> None:
        super().__init__(scheduler)
        self.payload, self.cycle = payload, cycle
        self.tr: asyncio.Transport | None = None
        self.pending = bytearray()
        self.asked = 0  # the request in flight

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = transport  # type: ignore[assignment]
        self.connected = True

    def data_received(self, data: bytes) -> None:
        if not self.pending:
            self.first_ns = monotonic_ns()
        self.pending += data
        if not self.busy:
            self.pending.clear()
            self.w.unexpected(self, "bytes received with no request in flight")
            return
        end = self.pending.find(b"\n")
        if end < 0:
            return
        if end + 1 != len(self.pending):
            self.pending.clear()
            self.w.failed(self, BAD_RESPONSE, "more bytes than one answer line")
            return
        line = bytes(self.pending)
        self.pending.clear()
        if line.startswith(b"NO "):
            self.w.rejected(self, REJECTED, f"shout: {line[3:-1].decode(errors='replace')}", False)
        elif line != self.payload.answers[self.asked]:  # checking an answer: the transport's, on the hot path
            self.w.rejected(self, WRONG_ANSWER, f"shout answered {line[:40]!r}, expected "
                                                f"{self.payload.answers[self.asked][:40]!r}", False)
        else:
            self.w.answered(self, False)

    def connection_lost(self, exc: Exception | None) -> None:
        self.tr = None
        self.connected = False
        self.pending.clear()
        self.w.lost(self, exc)

    def send(self, intended_ns: int = 0) -> int:
        now = monotonic_ns()
        self.sent_ns = now
        self.intended_ns = intended_ns or now
        self.busy = True
        self.asked = self.cycle.take()
        self.tr.write(self.payload.requests[self.asked])  # type: ignore[union-attr]
        self.written_ns = monotonic_ns()
        return now

    def abort(self) -> None:
        if self.tr is not None:
            self.tr.abort()


class ShoutDialer(TcpDialer):
    def __init__(self, scheduler: Scheduler, payload: ShoutPayload) -> None:
        super().__init__(scheduler, payload.host, payload.port)
        self.payload = payload
        self.cycle = RequestCycle(len(payload.requests), scheduler.index)

    def connection(self) -> ShoutConnection:
        return ShoutConnection(self.w, self.payload, self.cycle)


class ShoutTransport:
    def dialer(self, scheduler: Scheduler, payload: Any) -> Dialer:
        return ShoutDialer(scheduler, payload)


TRANSPORT = ShoutTransport()


# -- the session's side: the API behind the seam


@dataclass(frozen=True)
class ShoutEndpoint:
    name: str
    http_url: str  # shout://host:port


@dataclass
class ShoutPrepared:
    payload: ShoutPayload
    request_bytes: int

    async def close(self) -> None:
        return None


class ShoutApi:
    """Model ``model`` of a shout server at ``url``; its inputs: ``texts``, one request each."""

    decoupled = False
    stats = None  # the shout protocol keeps no statistics: the levels carry no server breakdown
    cache = None  # nor a cache
    trace_times = None  # nor a trace
    round_trip_method = "shout health line"

    def __init__(self, url: str, model: str, texts: Sequence[str]) -> None:
        self.url, self._model, self.texts = url, model, list(texts)
        where = urlsplit(url)
        self.host, self.port = where.hostname or "127.0.0.1", where.port or 7

    @property
    def model(self) -> str:
        return self._model

    def endpoints(self) -> list[ShoutEndpoint]:
        return [ShoutEndpoint("ep1", self.url)]

    def transport(self, load: Any) -> str:
        if load.transport != NAME:
            raise UserError(f"load.transport: the shout API offers {NAME!r}, found {load.transport!r}")
        return __name__

    async def requests(self, load: Any, publish: Any, stop: asyncio.Event) -> list[str]:
        if not self.texts or any("\n" in t for t in self.texts):
            raise UserError("shout: each input is one non-empty line")
        return [" ".join([t] * load.batch_size) for t in self.texts]  # a batch: the text that many times

    async def prepare(self, load: Any, requests: Sequence[object], gpus: tuple[int, ...]) -> list[ShoutPrepared]:
        texts = [str(r) for r in requests]
        lines = [f"{self._model} {t}\n".encode() for t in texts]
        answers = [f"OK {t.upper()}\n".encode() for t in texts]
        return [ShoutPrepared(ShoutPayload(self.host, self.port, lines, answers), max(map(len, lines)))]

    async def round_trip(self) -> float | None:
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            return None
        try:
            start = time.perf_counter()
            writer.write(b"?\n")
            await reader.readline()
            return time.perf_counter() - start
        finally:
            writer.close()

    async def wait_ready(self, endpoint: int, stop: asyncio.Event, timeout_s: float) -> float | None:
        start = time.monotonic()
        while time.monotonic() - start < timeout_s and not stop.is_set():
            if await self.round_trip() is not None:
                return time.monotonic() - start
            await asyncio.sleep(0.1)
        return None


# -- a server of it


class ShoutServer:
    """Serves model ``model``; counts the requests it answered. ``wrong_every``: every Nth answer
    is wrong (0: none)."""

    def __init__(self, model: str = "shout", wrong_every: int = 0) -> None:
        self.model = model.encode()
        self.wrong_every = wrong_every
        self.answered = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                if line == b"?\n":
                    writer.write(b"READY\n")
                    continue
                model, _, text = line.rstrip(b"\n").partition(b" ")
                self.answered += 1
                if model != self.model:
                    writer.write(b"NO unknown model '" + model + b"'\n")
                elif self.wrong_every and self.answered % self.wrong_every == 0:
                    writer.write(b"OK " + text + b"\n")  # not shouted: a wrong answer
                else:
                    writer.write(b"OK " + text.upper() + b"\n")
        except ConnectionError:
            pass
        finally:
            writer.close()
