"""load.transport = generate_stream: Triton's generate extension, ``POST .../generate_stream``, each response a server-sent event over HTTP/1.1, for decoupled models.

Each request is a JSON object naming the model's inputs with their values (a BYTES input of one
element as a string, a number as a number), encoded once per sweep in the session, and sent as
a whole HTTP request on a keep-alive connection, one at a time. The answer is a chunked
``text/event-stream``: each ``data:`` event one response of the model, checked (every output
asked for, with a value of its datatype's JSON kind) and timed by the kernel's receive time
(engine/net/stamped_socket.py; the first: TTFT; the gaps between the next: ITL); the body's last chunk ends the request. With validation data, the last
event's values are compared with the request's (a stream's answer is its last response, as
perf_analyzer's ``validation_data`` reads it): a difference is a ``wrong_answer``. An ``error`` event, or an
answer that is not 200, refuses it once the body ends (one not chunked at once, its connection
closed); a connection that closes before the body's end is lost (``connection_reset``), never a
shorter answer. Every line is bounded (the head, a chunk's size line, an event: engine/net/sse.py) and searched
once; an answer that does not parse, whatever the parser raises, is a ``malformed_answer``.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from dataclasses import dataclass
from typing import Any

from engine.net.connection import (
    MALFORMED_ANSWER,
    REJECTED,
    RESPONSE_TOO_LARGE,
    SERVER_ERROR,
    WRONG_ANSWER,
    Connection,
    Dialer,
    RequestCycle,
    Scheduler,
    StreamTimes,
    first_line,
)
from engine.net.http1 import BadResponse, Head, error_message, parse_head
from engine.net.sse import MAX_EVENT, ChunkedEvents
from engine.net.stamped_socket import arrival
from engine.net.tcp import TcpDialer
from engine.triton.answer_values import EXACT, Expected, compare_output
from engine.triton.transports import Prepared, SweepInputs, json_token_count, token_count_problem

monotonic_ns = time.monotonic_ns
JSON_KINDS: dict[str, tuple[type, ...]] = {"BYTES": (str,), "BOOL": (bool,), "FP16": (int, float), "FP32": (int, float),
                                           "FP64": (int, float), "BF16": (int, float)}


@dataclass
class GeneratePayload:
    host: str
    port: int
    tls: bool
    server_hostname: str
    requests: tuple[bytes, ...]  # each whole HTTP request, sent in turn
    outputs: tuple[tuple[str, str], ...]  # (name, datatype) of each output every event must hold
    expected: tuple[dict[str, Expected], ...] = ()  # validation data per request (empty: values not compared)
    labels: tuple[str, ...] = ()  # each request's entry, for the error line
    tolerance: float = 0.0  # floats: relative and absolute
    tokens_from: str = ""  # the output that carries each event's token count (load.tokens_from)


def event_problem(event: Any, outputs: tuple[tuple[str, str], ...]) -> str | None:
    """One line on what is wrong with one event's JSON, or None."""
    if not isinstance(event, dict):
        return "an event that is not a JSON object"
    for name, datatype in outputs:
        if name not in event:
            return f"event lacks output {name}"
        value = event[name]
        values = value if isinstance(value, list) else [value]
        kinds = JSON_KINDS.get(datatype, (int,))
        for v in values:
            if not isinstance(v, kinds) or (bool not in kinds and isinstance(v, bool)):
                return f"output {name} holds {json.dumps(v)[:40]}, not a {datatype} value"
    return None


def raw_of(value: Any, datatype: str) -> bytes | None:
    """An event's JSON value of one output as the raw bytes validation data holds (BYTES:
    length-prefixed UTF-8), or None when it cannot be one."""
    values = value if isinstance(value, list) else [value]
    if datatype == "BYTES":
        return b"".join(len(b).to_bytes(4, "little") + b for b in (str(v).encode() for v in values))
    code = EXACT[datatype][1] if datatype in EXACT else {"FP16": "e", "FP32": "f", "FP64": "d"}.get(datatype)
    if code is None:
        return None
    try:
        return struct.pack("<" + code * len(values), *values)
    except struct.error:
        return None


class Refused(Exception):
    """An error answer that is not an event stream: refused as the server's status says."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


class GenerateConnection(Connection, asyncio.Protocol):
    """One keep-alive connection carrying at most one generate_stream request at a time."""

    def __init__(self, scheduler: Scheduler, dialer: GenerateDialer) -> None:
        super().__init__(scheduler)
        self.dialer = dialer
        self.tr: asyncio.Transport | None = None
        self.sent_index = 0  # which of the sweep's requests is in flight (validation data)
        self._reset()

    def _reset(self) -> None:
        self.buf = bytearray()  # the head, until it is whole
        self.head: Head | None = None
        self.body = ChunkedEvents(self._event)  # the chunks and events after it (engine/net/sse.py)
        self.now = 0  # the arrival stamp of the bytes being framed
        self.problem: tuple[str, str] | None = None  # the first (kind, message) found in this answer
        self.times = StreamTimes()
        self.stream = self.times
        self.last: dict[str, Any] | None = None  # the last event that passed its check

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = transport  # type: ignore[assignment]
        self.connected = True
        self._reset()

    def data_received(self, data: bytes) -> None:
        now = arrival(self.tr, self.w.selector, self.sent_ns)  # the kernel's receive time (stamped_socket)
        if not self.busy:
            self.w.unexpected(self, "bytes received with no request in flight")
            return
        try:
            ended = self._take(data, now)
        except Refused as exc:
            self._reset()
            self.w.rejected(self, exc.kind, exc.message, True)  # the connection is closed: its body is not read
            return
        except BadResponse as exc:
            self._fail(str(exc))
            return
        except Exception as exc:  # whatever the server's bytes make a parser raise: its answer, never ours
            self._fail(f"an answer that does not parse: {first_line(exc)}")
            return
        if ended:
            self._finish()

    def _take(self, data: bytes, now: int) -> bool:
        """Frame what arrived; True at the body's last chunk."""
        if self.head is None:
            self.buf += data
            # only the bytes not yet searched (less the 3 a blank line may straddle): linear
            head = parse_head(self.buf, len(self.buf), start=max(0, len(self.buf) - len(data) - 3))
            if head is None:
                return False
            if not head.chunked and head.status == 200:
                raise BadResponse("HTTP 200 answer that is not a chunked event stream")
            if not head.chunked:  # an error answered whole (its body's start, if here, says why)
                body = bytes(self.buf[head.head_len : head.head_len + (head.content_length or 0)])
                said = f": {error_message(body, 200)}" if body else ""
                raise Refused(REJECTED if head.status < 500 else SERVER_ERROR, f"HTTP {head.status}{said}")
            self.head = head
            if head.status != 200:
                self.problem = (REJECTED if head.status < 500 else SERVER_ERROR, f"HTTP {head.status}")
            data, self.buf = bytes(self.buf[head.head_len :]), bytearray()
        self.now = now
        ended = self.body.feed(data)
        if self.body.oversized and self.problem is None:
            self.problem = (RESPONSE_TOO_LARGE, f"an event past {MAX_EVENT} bytes")
        return ended

    def _event(self, data: bytes) -> None:
        now = self.now
        try:
            value = json.loads(data)
        except Exception as exc:  # ValueError, and RecursionError for deeply nested JSON
            self.problem = self.problem or (MALFORMED_ANSWER, f"an event whose data is not JSON ({first_line(exc)})")
            return
        if isinstance(value, dict) and "error" in value:
            kind = self.problem[0] if self.problem else REJECTED
            self.problem = (kind, f"{self.problem[1] + ': ' if self.problem else ''}{' '.join(str(value['error']).split())[:200]}")
            return
        problem = event_problem(value, self.dialer.payload.outputs)
        if problem is not None:
            self.problem = self.problem or (MALFORMED_ANSWER, problem)
            return
        tokens = 1
        counted = self.dialer.payload.tokens_from
        if counted:
            found = json_token_count(value.get(counted))
            problem = token_count_problem(found, counted)
            if problem is not None:
                self.problem = self.problem or (MALFORMED_ANSWER, problem)
                return
            tokens = found  # type: ignore[assignment]  # not None: checked
        self.times.add(now, tokens)
        self.last = value

    def _finish(self) -> None:
        head = self.head
        assert head is not None
        self.first_ns = monotonic_ns()
        problem = self.problem
        close = head.close
        if problem is None and self.times.responses == 0:
            problem = (MALFORMED_ANSWER, "the event stream ended with no response")
        if problem is None and self.dialer.payload.expected and self.last is not None:
            wrong = self._wrong(self.last)
            problem = (WRONG_ANSWER, wrong) if wrong else None
        self.buf, self.head, self.body = bytearray(), None, ChunkedEvents(self._event)
        if problem is not None:
            self.w.rejected(self, problem[0], problem[1], close)
        else:
            self.w.answered(self, close)

    def _wrong(self, event: dict[str, Any]) -> str | None:
        """How the last event's values differ from the request's validation data, or None."""
        payload = self.dialer.payload
        for name, want in payload.expected[self.sent_index].items():
            got = raw_of(event[name], want.datatype) if name in event else None
            problem = (f"output {name!r} is not in the answer" if name not in event
                       else f"output {name!r} is not a {want.datatype} value" if got is None
                       else compare_output(name, want, got, payload.tolerance))
            if problem is not None:
                return f"{payload.labels[self.sent_index]}: {problem}"
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.tr = None
        self.connected = False
        self.w.lost(self, exc)

    # -- Connection

    def send(self, intended_ns: int = 0) -> int:
        now = monotonic_ns()
        self.sent_ns = self.written_ns = now
        self.intended_ns = intended_ns or now
        self.busy = True
        self._reset()
        self.sent_index = self.dialer.cycle.take()
        self.tr.write(self.dialer.payload.requests[self.sent_index])  # type: ignore[union-attr]
        return now

    def abort(self) -> None:
        if self.tr is not None:
            self.tr.abort()

    def _fail(self, message: str, kind: str = MALFORMED_ANSWER) -> None:
        self._reset()
        self.w.failed(self, kind, message)


class GenerateDialer(TcpDialer):
    stamped = True
    def __init__(self, scheduler: Scheduler, payload: GeneratePayload) -> None:
        super().__init__(scheduler, payload.host, payload.port, payload.tls, payload.server_hostname)
        self.payload = payload
        self.cycle = RequestCycle(len(payload.requests), scheduler.index)

    def connection(self) -> GenerateConnection:
        return GenerateConnection(self.w, self)


def json_value(metadata: dict, shape: list[int], blob: bytes) -> Any:
    """One input's raw bytes as the generate extension's JSON: one element as itself, more as a list."""
    import numpy as np

    from engine.triton.request import NUMPY_DTYPES

    datatype = metadata["datatype"]
    if datatype == "BYTES":
        values: list[Any] = []
        at = 0
        while at < len(blob):
            n = int.from_bytes(blob[at : at + 4], "little")
            values.append(blob[at + 4 : at + 4 + n].decode("utf-8", "replace"))
            at += 4 + n
    else:
        values = np.frombuffer(blob, dtype=NUMPY_DTYPES[datatype]).tolist()
    return values[0] if len(values) == 1 else values


class GenerateStreamTransport:
    async def prepare(self, sweep: SweepInputs) -> Prepared:
        from engine.errors import UserError
        from engine.triton.transports.http import server_endpoint

        if sweep.batch_size != 1:
            raise UserError("load.transport 'generate_stream' sends one request of one prompt: load.batch_size must be 1")
        endpoint = server_endpoint(sweep)
        target = sweep.target
        raws = []
        for r in sweep.requests:
            try:
                body = json.dumps({t["name"]: json_value(t, r.shapes[t["name"]], blob) for t, blob in r.tensors}).encode()
            except KeyError as exc:
                raise UserError(f"load.transport 'generate_stream': datatype {exc} cannot travel as JSON") from None
            extra = "".join(f"{k}: {v}\r\n" for k, v in target.headers.items())
            head = (f"POST {target.model_path}/generate_stream HTTP/1.1\r\nHost: {endpoint.host}:{endpoint.port}\r\n"
                    f"Content-Type: application/json\r\nAccept: text/event-stream\r\n{extra}"
                    f"Content-Length: {len(body)}\r\n\r\n")
            raws.append(head.encode() + body)
        outputs = tuple((o["name"], str(o.get("datatype") or "")) for o in sweep.info.outputs)
        expected = tuple(r.expected for r in sweep.requests) if sweep.validating else ()
        payload = GeneratePayload(endpoint.host, endpoint.port, endpoint.tls, endpoint.host, tuple(raws), outputs,
                                  expected, tuple(r.label for r in sweep.requests), sweep.tolerance,
                                  sweep.tokens_from[0] if sweep.tokens_from else "")
        return Prepared(payload, sum(len(r) for r in raws) // len(raws))

    def dialer(self, scheduler: Scheduler, payload: Any) -> Dialer:
        return GenerateDialer(scheduler, payload)


TRANSPORT = GenerateStreamTransport()
