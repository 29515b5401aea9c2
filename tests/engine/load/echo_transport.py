"""A toy transport, for tests/engine/load/test_transport_recipe.py: what a transport that is not HTTP
needs to bring, and nothing more. Its protocol ("echo"), over TCP:

- a request is a frame: 4-byte big-endian length, then the model's name, a NUL, the tensor bytes;
- the answer: 1 status byte (0 ok, 1 refused), 4-byte length, then the bytes sent (ok) or why not.

``serve_echo`` is a server of it. The transport itself is the rest: the session's side encodes
the frame once per sweep, the worker's side frames answers and reports them to the scheduler.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from engine.net.connection import BAD_RESPONSE, REJECTED, Connection, Dialer, Scheduler
from engine.net.tcp import TcpDialer
from engine.triton.transports import Prepared, SweepInputs

monotonic_ns = time.monotonic_ns
OK, REFUSED = 0, 1
MAX_FRAME = 64 << 20


def frame(model: str, tensors: bytes) -> bytes:
    body = model.encode() + b"\0" + tensors
    return len(body).to_bytes(4, "big") + body


@dataclass
class EchoPayload:
    host: str
    port: int
    frame: bytes


class EchoConnection(Connection, asyncio.Protocol):
    def __init__(self, scheduler: Scheduler, request: bytes) -> None:
        super().__init__(scheduler)
        self.request = request
        self.tr: asyncio.Transport | None = None
        self.pending = bytearray()
        self.echoed = 0  # bytes the last answer echoed

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
        if len(self.pending) < 5:
            return
        end = 5 + int.from_bytes(self.pending[1:5], "big")
        if len(self.pending) < end:
            return
        if len(self.pending) > end:
            self.pending.clear()
            self.w.failed(self, BAD_RESPONSE, "more bytes than the answer holds")
            return
        status, body = self.pending[0], bytes(self.pending[5:])
        self.pending.clear()
        if status == OK:
            self.echoed = len(body)
            self.w.answered(self, False)
        else:
            self.w.rejected(self, REJECTED, f"echo status {status}: {body.decode(errors='replace')}", False)

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
        self.tr.write(self.request)  # type: ignore[union-attr]
        self.written_ns = monotonic_ns()
        return now

    def abort(self) -> None:
        if self.tr is not None:
            self.tr.abort()

    def check(self) -> str | None:
        sent = len(self.request) - 4
        return None if self.echoed == sent else f"echo answered {self.echoed} bytes of {sent}"


class EchoDialer(TcpDialer):
    def __init__(self, scheduler: Scheduler, payload: EchoPayload) -> None:
        super().__init__(scheduler, payload.host, payload.port)
        self.frame = payload.frame

    def connection(self) -> EchoConnection:
        return EchoConnection(self.w, self.frame)


class EchoTransport:
    async def prepare(self, sweep: SweepInputs) -> Prepared:
        where = urlsplit(sweep.target.http_url)  # echo://host:port
        request = frame(sweep.target.model, b"".join(blob for _tensor, blob in sweep.inputs[1]))
        return Prepared(EchoPayload(where.hostname or "127.0.0.1", where.port or 7, request), len(request))

    def dialer(self, scheduler: Scheduler, payload: Any) -> Dialer:
        return EchoDialer(scheduler, payload)


TRANSPORT = EchoTransport()


class EchoServer:
    """Serves the echo protocol for model ``model``; counts the frames it answered."""

    def __init__(self, model: str = "echo") -> None:
        self.model = model.encode()
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
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                if size > MAX_FRAME:
                    break
                body = await reader.readexactly(size)
                model, _, tensors = body.partition(b"\0")
                if model == self.model:
                    writer.write(bytes([OK]) + len(body).to_bytes(4, "big") + body)
                else:
                    why = b"unknown model '" + model + b"'"
                    writer.write(bytes([REFUSED]) + len(why).to_bytes(4, "big") + why)
                self.answered += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
