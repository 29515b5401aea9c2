"""load.transport = http: KServe v2 over raw HTTP/1.1 keep-alive connections, the inputs in the body
with Triton's binary tensor extension (the system_shm and cuda_shm transports send the same way).

The requests' bytes are encoded once per sweep in the session (one request, or one per input
data entry); every connection writes them as they are, each the next of its worker's
RequestCycle. Hot path, per response: one ``buffer_updated`` callback (the socket was read straight
into the connection's own buffer) frames the response from its head (Content-Length) and reports
it to the scheduler, which in concurrency mode writes the same bytes again on the same connection.
No coroutine, future, or JSON per request: every answer is checked (engine/triton/answer_check.py),
JSON parsed only for an error body or an answer whose header differs from the last good one. An
answer past the sweep's size cap closes its connection. Only the standard library and small
modules of ours at import: load workers import this module.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.net.connection import (
    BAD_RESPONSE,
    MALFORMED_ANSWER,
    REJECTED,
    RESPONSE_TOO_LARGE,
    SEQUENCE_DROPPED,
    SERVER_ERROR,
    WRONG_ANSWER,
    Connection,
    Dialer,
    RequestCycle,
    Scheduler,
)
from engine.net.http1 import (
    BadResponse,
    Endpoint,
    Head,
    dechunk,
    error_message,
    parse_endpoint,
    parse_head,
)
from engine.net.tcp import TcpDialer
from engine.triton.answer_check import AnswerCheck, AnswerSpec, ShmOutput, response_cap
from engine.triton.transports import Prepared, SweepInputs
from engine.triton.transports.sequence_steps import (
    DROPPED_TEXT,
    SequenceCursor,
    SequencePlan,
    Sequences,
    dropped_line,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from engine.triton.shm import ShmPlan

monotonic_ns = time.monotonic_ns  # CLOCK_MONOTONIC: shared with the session's T0
INITIAL_BUFFER = 8192  # per connection; grows to the largest response seen on it
UNCHECKED_MAX_BODY = 256 << 20  # the body cap of a connection made without an AnswerSpec (tests)
CHUNK_SLACK = 64 * 1024  # a chunked body's framing, beyond twice its cap, before it is refused
ONE_WRITE_TAIL = 64 * 1024  # a sequence step's request up to this much past its slots is copied whole


@dataclass
class HttpPayload:
    """What each load worker gets: where to connect, and the requests its connections send."""

    host: str
    port: int
    tls: bool
    server_hostname: str
    requests: tuple[bytes, ...]  # each whole HTTP request, sent in turn
    answers: AnswerSpec  # what every answer must hold, and its size cap
    sequence: SequencePlan | None = None  # a sequence model's: each connection walks its sequences


class HttpConnection(Connection, asyncio.BufferedProtocol):
    """One keep-alive connection carrying at most one request at a time.

    A BufferedProtocol: the socket is read straight into this connection's own buffer
    (recv_into). With a plain Protocol asyncio allocates a fresh 256 KiB bytes object for every
    read, which cost up to twice the worker CPU per request (the design notes in docs/results
    say what was measured).
    """

    def __init__(self, scheduler: Scheduler, requests: tuple[bytes, ...] = (b"",), answers: AnswerCheck | None = None,
                 cycle: RequestCycle | None = None) -> None:
        super().__init__(scheduler)
        self.requests = requests
        self.cycle = cycle or RequestCycle(len(requests), 0)  # the dialer shares its worker's among its connections
        self.sent = 0  # the index of the request in flight
        self.answers = answers  # None: answers are framed, not checked
        self.max_body = answers.spec.max_bytes if answers is not None else UNCHECKED_MAX_BODY
        self.tr: asyncio.Transport | None = None
        self.buf = bytearray(INITIAL_BUFFER)
        self.view = memoryview(self.buf)
        self.filled = 0
        self.need = 0  # bytes the response being read needs (from its Content-Length)
        self.head: Head | None = None
        self.end = 0  # the last whole response's length in buf (valid during the callback)
        self.paused = False  # the transport holds unsent bytes of the request
        self.cursor: SequenceCursor | None = None  # a sequence model's: counts the good answers

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = transport  # type: ignore[assignment]  # a TCP connection: asyncio hands a Transport
        self.connected = True
        # pause_writing as soon as the transport keeps any byte back, resume_writing when it has
        # handed the last one to the kernel: the end of each request's write, at no cost when
        # the kernel takes the whole request at once
        transport.set_write_buffer_limits(high=0)  # type: ignore[attr-defined]  # a WriteTransport
        self.paused = False
        self._reset()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.filled >= len(self.buf) or self.need > len(self.buf):
            # a new, larger buffer (not a resize: asyncio may still hold a view of the old one)
            bigger = bytearray(max(2 * len(self.buf), self.need))
            bigger[: self.filled] = self.view[: self.filled]
            self.buf, self.view = bigger, memoryview(bigger)
        return self.view[self.filled :]

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.busy and self.written_ns == 0:
            self.written_ns = monotonic_ns()

    def buffer_updated(self, nbytes: int) -> None:
        if self.filled == 0:
            self.first_ns = monotonic_ns()
            selector = self.w.selector
            self.unread_ns = self.first_ns - selector.unread_since() if selector is not None else 0
        self.filled += nbytes
        if not self.busy:
            self._reset()
            self.w.unexpected(self, "bytes received with no request in flight")
            return
        head = self.head
        if head is None:
            try:
                head = parse_head(self.buf, self.filled)
            except BadResponse as exc:
                self._fail(str(exc))
                return
            if head is None:
                return
            self.head = head
        decoded = None
        if head.content_length is not None:
            if head.content_length > self.max_body:
                self._fail(f"an answer of {head.content_length} bytes, past the cap of {self.max_body}", RESPONSE_TOO_LARGE)
                return
            end = head.head_len + head.content_length
            self.need = end  # the next get_buffer makes room for the whole body at once
        elif head.chunked:
            if self.filled - head.head_len > 2 * self.max_body + CHUNK_SLACK:
                self._fail(f"a chunked answer past the cap of {self.max_body} bytes", RESPONSE_TOO_LARGE)
                return
            try:
                decoded = dechunk(bytes(self.view[head.head_len : self.filled]))
            except BadResponse as exc:
                self._fail(str(exc))
                return
            if decoded is not None and len(decoded[0]) > self.max_body:
                self._fail(f"a chunked answer of {len(decoded[0])} bytes, past the cap of {self.max_body}", RESPONSE_TOO_LARGE)
                return
            end = -1 if decoded is None else head.head_len + decoded[1]
        else:
            self._fail("response without Content-Length")
            return
        if end < 0 or self.filled < end:
            return
        if self.filled > end:
            self._fail("more bytes than the response holds")
            return
        self.head = None
        self.filled = 0
        self.need = 0
        self.end = end
        if head.status == 200:
            answers = self.answers
            if answers is not None:
                ihl = head.inference_header_length
                if decoded is None:
                    problem = answers.check(self.buf, head.head_len, end - head.head_len, ihl)
                else:
                    problem = answers.check_body(decoded[0], ihl)
                if problem is not None:
                    self.w.rejected(self, MALFORMED_ANSWER, problem, head.close)
                    return
                if answers.validate:
                    if decoded is None:
                        problem = answers.check_values(self.buf, head.head_len, end - head.head_len, ihl, self.sent)
                    else:
                        body = bytearray(decoded[0])
                        problem = answers.check_values(body, 0, len(body), ihl, self.sent)
                    if problem is not None:
                        self.w.rejected(self, WRONG_ANSWER, problem, head.close)
                        return
            if self.cursor is not None:
                self.cursor.answered += 1
            self.w.answered(self, head.close)
        else:
            kind, text = self._rejection(head, end)
            self.w.rejected(self, kind, text, head.close)

    def connection_lost(self, exc: Exception | None) -> None:
        self.tr = None
        self.connected = False
        self._reset()
        self.w.lost(self, exc)

    # -- Connection

    def send(self, intended_ns: int = 0) -> int:
        now = monotonic_ns()
        self.sent_ns = now
        self.intended_ns = intended_ns or now
        self.busy = True
        self.written_ns = 0
        cycle = self.cycle  # RequestCycle.take, inlined: the hot path
        self.sent = i = cycle.next
        cycle.next = i + 1 if i + 1 < cycle.count else 0
        self.tr.write(self.requests[i])  # type: ignore[union-attr]  # only connected connections send
        if not self.paused:
            self.written_ns = monotonic_ns()
        return now

    def abort(self) -> None:
        if self.tr is not None:
            self.tr.abort()

    # -- ours

    def _reset(self) -> None:
        self.filled = self.need = 0
        self.head = None

    def _fail(self, message: str, kind: str = BAD_RESPONSE) -> None:
        self._reset()
        self.w.failed(self, kind, message)

    def _error_text(self, head: Head, end: int) -> str:
        body = bytes(self.view[head.head_len : end]) if head.content_length is not None else b""
        return f"HTTP {head.status}: {error_message(body)}"

    def _rejection(self, head: Head, end: int) -> tuple[str, str]:
        return _error_kind(head.status), self._error_text(head, end)


class SequenceHttpConnection(HttpConnection):
    """A sequence model's connection: one sequence at a time, its steps in order
    (engine/triton/transports/sequence_steps.py)."""

    def __init__(self, scheduler: Scheduler, requests: tuple[bytes, ...], answers: AnswerCheck,
                 plan: SequencePlan, sequences: Sequences) -> None:
        super().__init__(scheduler, requests, answers, sequences.cycle)
        self.plan = plan
        self.cursor = SequenceCursor(sequences)

    def send(self, intended_ns: int = 0) -> int:
        now = monotonic_ns()
        self.sent_ns = now
        self.intended_ns = intended_ns or now
        self.busy = True
        self.written_ns = 0
        cursor = self.cursor
        assert cursor is not None
        cursor.advance()
        self.step, self.ends_sequence = cursor.step, cursor.last
        self.sent = i = cursor.request()
        raw = self.requests[i]
        head = cursor.head(raw, self.plan.slots[i])
        tr = self.tr
        assert tr is not None  # only connected connections send
        if len(raw) - len(head) <= ONE_WRITE_TAIL:  # one write, one segment: the server reads it at once
            head += raw[len(head) :]
            tr.write(head)
        else:  # a large request: its tensors are not copied
            tr.write(head)
            tr.write(memoryview(raw)[len(head) :])
        if not self.paused:
            self.written_ns = monotonic_ns()
        return now

    def _rejection(self, head: Head, end: int) -> tuple[str, str]:
        kind, text = super()._rejection(head, end)
        if DROPPED_TEXT in text and self.cursor is not None:
            return SEQUENCE_DROPPED, dropped_line(text, self.cursor.id, self.plan.idle_us)
        return kind, text


def _error_kind(status: int) -> str:
    if 400 <= status < 500:
        return REJECTED
    return SERVER_ERROR if status >= 500 else BAD_RESPONSE


class HttpDialer(TcpDialer):
    def __init__(self, scheduler: Scheduler, payload: HttpPayload) -> None:
        super().__init__(scheduler, payload.host, payload.port, payload.tls, payload.server_hostname)
        self.payload = payload
        self.answers = AnswerCheck(payload.answers)  # shared by this worker's connections
        self.cycle = RequestCycle(len(payload.requests), scheduler.index)  # so is its place in the requests
        plan = payload.sequence
        if plan is not None:  # the worker's place in the streams, and its sequence ids
            streams = RequestCycle(len(plan.streams), scheduler.index) if plan.streams else self.cycle
            self.sequences = Sequences(plan, scheduler.index, streams)

    def forget(self) -> None:
        super().forget()
        if self.payload.sequence is not None:
            self.sequences.reclaim()

    def connection(self) -> HttpConnection:
        plan = self.payload.sequence
        if plan is not None:
            return SequenceHttpConnection(self.w, self.payload.requests, self.answers, plan, self.sequences)
        return HttpConnection(self.w, self.payload.requests, self.answers, self.cycle)


def server_endpoint(sweep: SweepInputs) -> Endpoint:
    """The target's URL, split; a URL that is not http(s) is the user's error."""
    from engine.errors import UserError

    try:
        return parse_endpoint(sweep.target.http_url)
    except ValueError as exc:
        raise UserError(f"server URL: {exc}") from None


class HttpTransport:
    """The inputs in the request body. The shared-memory transports reuse it with a ShmPlan."""

    async def prepare(self, sweep: SweepInputs) -> Prepared:
        return self.prepared(sweep)

    def prepared(self, sweep: SweepInputs, shm: ShmPlan | None = None,
                 cleanup: Callable[[], Awaitable[None]] | None = None) -> Prepared:
        """Encode the sweep's requests (the inputs named by ``shm``'s regions when given)."""
        from engine.triton.request import prepare_request  # numpy: the session's side only

        endpoint = server_endpoint(sweep)
        raws = tuple(
            prepare_request(sweep.target, sweep.info, endpoint, sweep.batch_size, sweep.data, shm=shm,
                            inputs=(r.shapes, r.tensors, []), request=k, sequence=sweep.sequence is not None).raw
            for k, r in enumerate(sweep.requests)
        )
        info = sweep.info
        answers = AnswerSpec(
            {o["name"]: str(o.get("datatype") or "") for o in info.outputs},
            {name: ShmOutput(ref.region, ref.offset, ref.byte_size) for name, ref in (shm.outputs if shm else {}).items()},
            response_cap(info.outputs, info.max_batch_size, sweep.batch_size),
            expected=tuple(r.expected for r in sweep.requests) if sweep.validating else (),
            labels=tuple(r.label for r in sweep.requests),
            tolerance=sweep.tolerance,
        )
        plan = sweep.sequence.plan(raws) if sweep.sequence is not None else None
        payload = HttpPayload(endpoint.host, endpoint.port, endpoint.tls, endpoint.host, raws, answers, plan)
        return Prepared(payload, sum(len(r) for r in raws) // len(raws), cleanup)

    def dialer(self, scheduler: Scheduler, payload: Any) -> Dialer:
        return HttpDialer(scheduler, payload)


TRANSPORT = HttpTransport()
