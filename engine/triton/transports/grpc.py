"""load.transport = grpc: KServe v2 ``ModelInfer`` over our own HTTP/2 (engine/net/http2.py), one stream per request, several in flight on one TCP connection.

Why our own: grpc.aio's client CPU held the transport to 0.50 of perf_analyzer ``-i grpc`` at c=1
on a 2-core box (docs/results/grpc_cpu.md); here a request's frames leave in ``send()`` itself
and an answer is read off the socket with no library between (docs/results/grpc_own_http2.md).

The requests are serialised once per sweep in the session (grpc_common.GrpcRequests). A load
worker's connections (the scheduler's, one request at a time each: ``GrpcCall``) share pooled
HTTP/2 connections (``GrpcLink``), up to LINK_STREAMS calls on each and never more streams open
than the server's SETTINGS_MAX_CONCURRENT_STREAMS (a request past it waits for a stream to end), as
a gRPC client multiplexes its calls on a channel. Each request is one stream: HEADERS, then its
message in DATA ending the stream; the answer is the server's headers, one message and trailers,
matched to its call by stream id. Each answer is checked as grpc_stream's are (outputs, datatypes,
raw sizes; with validation data, values); the status in the trailers becomes the error kinds
and words grpc.aio's transport gave before it (grpc_common.error_kind): UNAVAILABLE or CANCELLED, a reset
stream, a GOAWAY or a broken connection lose the call (``connection_reset``). A timed-out call's
stream is reset (RST_STREAM CANCEL) and its connection kept for the others. Timings: written_ns when
the request is in the kernel's hands, first_ns the kernel's receive time of the answer's first
frame (stamped_socket.arrival), so our side is what HTTP's is: the answer unread and read.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from engine.net import http2
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
    first_line,
)
from engine.net.stamped_socket import arrival
from engine.net.tcp import TcpDialer
from engine.triton.answer_check import AnswerCheck
from engine.triton.transports.grpc_common import (
    BROKEN,
    GrpcPayload,
    GrpcRequests,
    ReplyLayouts,
    check_answer,
    error_kind,
    grpc_address,
    messages,
    not_grpc,
    status_line,
    status_of,
)
from engine.triton.transports.sequence_steps import (
    DROPPED_TEXT,
    SequenceCursor,
    SequencePlan,
    Sequences,
    dropped_line,
)

__all__ = ["TRANSPORT", "GrpcPayload", "GrpcTransport", "check_answer", "error_kind", "grpc_address", "messages",
           "not_grpc"]

monotonic_ns = time.monotonic_ns
METHOD = "/inference.GRPCInferenceService/ModelInfer"
# calls sharing one TCP connection, as perf_analyzer's gRPC client shares one channel among at most 6
# of its clients (tritonclient's grpc_client.cc, TRITON_CLIENT_GRPC_CHANNEL_MAX_SHARE_COUNT's
# default): c=4 is 4 streams on one socket, c=8 two sockets
LINK_STREAMS = 6
MAX_STREAM_ID = (1 << 31) - 1
# our receive windows (connection and each stream): large, so a server is never held back by
# them; the connection's given back once half is used
WINDOW = 1 << 30
CANCEL = 0x8  # RST_STREAM's error code for a call we gave up on
# A level's end leaves its calls' answers to come and drops them, rather than cancel the calls:
# Triton before 24.12 can die of SIGSEGV in its gRPC front end when a call is cancelled as it
# completes (triton-inference-server/server#7368 and #8034; seen here at a level's end, docs/results/grpc_own_http2.md).
# A link waits this long for them, then closes (a worker exits within the pool's 3 s).
LINGER_S = 2.0
WHOLE_BLOCK = http2.END_HEADERS | http2.PADDED | http2.PRIORITY_FLAG  # of a HEADERS frame's flags
# a peer's PING/SETTINGS we answer: at most this many a second, and at most this many bytes of
# answers queued while it does not read (RFC 9113 section 10.5), as grpc_stream allows
MAX_CONTROL_FRAMES = 1000
CONTROL_INTERVAL_NS = 1_000_000_000
MAX_CONTROL_QUEUED = 256 << 10


def request_headers(authority: str, tls: bool, metadata: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    return [(":method", "POST"), (":scheme", "https" if tls else "http"), (":path", METHOD), (":authority", authority),
            ("content-type", "application/grpc"), ("te", "trailers"),
            *((k.lower(), v) for k, v in metadata)]


class GrpcCall(Connection):
    """One of the scheduler's connections: a call at a time, each on a new stream of its link."""

    message: bytes | None = None  # the framed request in flight when it is its own (a sequence's step)
    cursor: SequenceCursor | None = None  # a sequence model's: where its sequence stands

    def __init__(self, scheduler: Scheduler, dialer: GrpcDialer) -> None:
        super().__init__(scheduler)
        self.dialer = dialer
        self.link: GrpcLink | None = None
        self.sid = 0  # the stream of the call in flight (0: none open)
        self.sent_index = 0  # which of the sweep's requests it is (validation data)
        self.window = 0  # the server's flow-control window of that stream
        self.pending = b""  # request bytes the windows do not take yet
        self.body = bytearray()  # the answer's DATA
        self.headers_seen = False
        self.unacked = 0  # DATA bytes of this stream since its last WINDOW_UPDATE

    def send(self, intended_ns: int = 0) -> int:
        now = monotonic_ns()
        self.sent_ns = self.written_ns = now
        self.intended_ns = intended_ns or now
        self.busy = True
        self.sent_index = self.dialer.cycle.take()
        link = self.link
        if link is None:  # lost meanwhile: the scheduler hears of it, the request counted lost
            self.w.loop.call_soon(self._orphaned)
        elif link.tr is None or len(link.streams) >= link.max_streams or link.queued:
            link.queued.append(self)  # a stream when one is free (``start``)
        else:
            link._open_stream(self)
        return now

    def _orphaned(self) -> None:
        if self.link is None and self.busy:
            self.w.lost(self, ConnectionResetError("the HTTP/2 connection closed before the request left"))

    def abort(self) -> None:
        link, self.link = self.link, None
        was_open, self.connected = self.connected, False
        if link is not None:
            link.detach(self)
        if was_open:  # as a socket's connection_lost: later, from the loop
            self.w.loop.call_soon(self.w.lost, self, None)


class SequenceGrpcCall(GrpcCall):
    """A sequence model's call: one sequence at a time, its steps in order
    (engine/triton/transports/sequence_steps.py); each step's message is its own copy."""

    def __init__(self, scheduler: Scheduler, dialer: GrpcDialer, plan: SequencePlan, sequences: Sequences) -> None:
        super().__init__(scheduler, dialer)
        self.plan = plan
        self.cursor = SequenceCursor(sequences)

    def send(self, intended_ns: int = 0) -> int:
        now = monotonic_ns()
        self.sent_ns = self.written_ns = now
        self.intended_ns = intended_ns or now
        self.busy = True
        cursor = self.cursor
        assert cursor is not None
        cursor.advance()
        self.step, self.ends_sequence = cursor.step, cursor.last
        self.sent_index = i = cursor.request()
        raw = self.dialer.messages[i]
        head = cursor.head(raw, self.plan.slots[i])
        self.message = bytes(head) + raw[len(head) :]
        link = self.link
        if link is None:  # lost meanwhile: the scheduler hears of it, the request counted lost
            self.w.loop.call_soon(self._orphaned)
        else:
            link.start(self)
        return now


class GrpcLink(asyncio.Protocol):
    """One TCP connection speaking HTTP/2, carrying the calls of the GrpcCalls attached to it."""

    def __init__(self, dialer: GrpcDialer) -> None:
        self.dialer = dialer
        self.w = dialer.w
        self.tr: Any = None  # a StampedSocket, or asyncio's transport (TLS)
        self.calls: set[GrpcCall] = set()  # attached, whether a call is in flight or not
        self.streams: dict[int, GrpcCall] = {}  # open streams
        self.queued: deque[GrpcCall] = deque()  # calls waiting for a stream (the server's limit)
        self.blocked: deque[GrpcCall] = deque()  # calls whose bytes wait for flow-control windows
        self.next_id = 1
        self.frames = http2.FrameReader()
        self.hpack = http2.HpackDecoder()
        self.block = bytearray()  # a header block awaiting its CONTINUATION frames
        self.block_stream = 0
        self.block_ends = False
        self.send_conn = http2.DEFAULT_WINDOW
        self.peer_window = http2.DEFAULT_WINDOW  # the server's initial stream window
        self.max_frame = http2.DEFAULT_MAX_FRAME
        self.max_streams = LINK_STREAMS  # the server's SETTINGS_MAX_CONCURRENT_STREAMS, at most ours
        self.unacked = 0  # DATA bytes since our last connection WINDOW_UPDATE
        self.ready: asyncio.Future[None] = self.w.loop.create_future()  # the server's first SETTINGS
        self.draining = False  # no new calls: GOAWAY, or stream ids run out
        self.closed = False
        self.why: BaseException | None = None
        self.controls = 0
        self.controls_ns = monotonic_ns()
        self.controls_queued = 0
        self.abandoned: set[int] = set()  # streams of calls that left with their answer to come
        self.linger: asyncio.TimerHandle | None = None

    @property
    def room(self) -> int:
        """How many more calls may attach."""
        if self.closed or self.draining:
            return 0
        return min(LINK_STREAMS, self.max_streams) - len(self.calls)

    # -- calls

    def attach(self, call: GrpcCall) -> None:
        call.link = self
        self.calls.add(call)

    def detach(self, call: GrpcCall) -> None:
        """``call`` leaves (aborted). At a level's end a stream whose request is all sent is left
        to end, its answer dropped (LINGER_S says why); otherwise (a timeout, a request still
        sending) it is reset. The link closes with its last call, once the answers left to come
        are in."""
        self.calls.discard(call)
        sid = call.sid
        if sid and self.streams.get(sid) is call:
            sent = self.dialer.ending and not call.pending and self.tr is not None
            self._end_stream(call, reset=not sent)
            if sent:
                self.abandoned.add(sid)
        if call in self.queued:
            self.queued.remove(call)
        if not self.calls:
            self._idle()

    def _idle(self) -> None:
        """No call left: close now, or when the abandoned streams end (at most LINGER_S)."""
        if not self.abandoned or self.tr is None:
            self._close(None)
            return
        self.draining = True  # no new call attaches
        if self.linger is None:
            self.linger = self.w.loop.call_later(LINGER_S, self._close, None)

    def _settle(self, stream: int) -> None:
        """An abandoned stream ended."""
        self.abandoned.discard(stream)
        if not self.abandoned and not self.calls:
            self._close(None)

    def start(self, call: GrpcCall) -> None:
        """Open a stream for ``call``'s request and write it, or queue it for a stream."""
        if self.tr is None or len(self.streams) >= self.max_streams or self.queued:
            self.queued.append(call)  # a closing link's are lost with it
            return
        self._open_stream(call)

    def _next_queued(self) -> None:
        """Calls waiting for a stream get one, in turn, as far as the server's limit allows."""
        while self.queued and len(self.streams) < self.max_streams and self.tr is not None and not self.draining:
            call = self.queued.popleft()
            self._open_stream(call)
            if not call.pending:  # its request left only now: the wait for a stream was ours, not the server's
                call.written_ns = monotonic_ns()

    def _open_stream(self, call: GrpcCall) -> None:
        sid = self.next_id
        self.next_id = sid + 2
        if self.next_id > MAX_STREAM_ID:
            self._drain()
        self.streams[sid] = call
        call.sid, call.window = sid, self.peer_window
        call.body = bytearray()
        call.headers_seen = False
        call.unacked = 0
        dialer = self.dialer
        own = call.message
        message = own if own is not None else dialer.messages[call.sent_index]
        size = len(message)
        stream = sid.to_bytes(4, "big")
        if size <= self.send_conn and size <= call.window and size <= self.max_frame:
            self.send_conn -= size
            call.window -= size
            # HEADERS (END_HEADERS) and DATA (END_STREAM) in one write, their fixed parts made once
            data_head = dialer.data_heads[call.sent_index] if own is None else size.to_bytes(3, "big") + b"\x00\x01"
            self.tr.write(b"".join((dialer.headers_head, stream, dialer.head_block, data_head, stream, message)))
            return
        self.tr.write(dialer.headers_head + stream + dialer.head_block)
        call.pending = message
        self.blocked.append(call)
        self._flush()

    def _flush(self) -> None:
        """Send what the server's windows take of the requests waiting, in order."""
        while self.blocked and self.tr is not None:
            call = self.blocked[0]
            room = min(self.send_conn, call.window)
            if room <= 0:
                return
            chunk, rest = call.pending[:room], call.pending[room:]
            self.send_conn -= len(chunk)
            call.window -= len(chunk)
            call.pending = rest
            frames = [chunk[i : i + self.max_frame] for i in range(0, len(chunk), self.max_frame)]
            last = len(frames) - 1
            self.tr.write(b"".join(http2.frame(http2.DATA, http2.END_STREAM if i == last and not rest else 0, call.sid,
                                               f) for i, f in enumerate(frames)))
            if rest:
                return
            self.blocked.popleft()
            call.written_ns = monotonic_ns()

    def _end_stream(self, call: GrpcCall, reset: bool = False) -> None:
        """``call``'s stream is over (``reset``: we end it); a call waiting for a stream gets it."""
        sid, call.sid = call.sid, 0
        self.streams.pop(sid, None)
        call.pending = b""
        if self.blocked and call in self.blocked:
            self.blocked.remove(call)
        if reset and self.tr is not None:
            self.tr.write(http2.frame(http2.RST_STREAM, 0, sid, CANCEL.to_bytes(4, "big")))
        if self.queued:
            self._next_queued()
        if self.draining and not self.streams and self.calls:  # without calls: _idle
            self._close(ConnectionResetError("the server closed the HTTP/2 connection (GOAWAY)"))

    def _lose(self, call: GrpcCall, why: BaseException | None) -> None:
        """``call`` ends as a lost connection (counted ``connection_reset`` with a call in flight);
        the scheduler opens it again, on this link if it has room."""
        self.calls.discard(call)
        if call.sid:
            self._end_stream(call)
        if call in self.queued:
            self.queued.remove(call)
        call.link, call.connected = None, False
        self.w.lost(call, why)
        if not self.calls:
            self._idle()

    def _drain(self) -> None:
        """No new calls here: the idle ones leave now (the scheduler opens them elsewhere), the
        others when their call ends."""
        self.draining = True
        for call in [c for c in self.calls if c.connected and not c.busy]:
            self._lose(call, None)  # None: closed with no call in flight

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = transport
        if not self.calls:  # every call left while it connected (the level ended)
            self._close(None)
            return
        hello = http2.settings_frame({http2.ENABLE_PUSH: 0, http2.INITIAL_WINDOW_SIZE: WINDOW})
        self.tr.write(http2.PREFACE + hello + http2.window_update(0, WINDOW - http2.DEFAULT_WINDOW))

    def connection_lost(self, exc: Exception | None) -> None:
        self.tr = None
        self.closed = True
        self.abandoned.clear()
        if self.linger is not None:
            self.linger.cancel()
            self.linger = None
        self.dialer.gone(self)
        why = exc or self.why or ConnectionResetError("the server closed the HTTP/2 connection")
        if not self.ready.done():
            self.ready.set_exception(why)
            self.ready.exception()  # retrieved: an open that timed out no longer awaits it
        for call in list(self.calls):
            self.calls.discard(call)
            call.link, call.sid, call.pending = None, 0, b""
            if call.connected:
                call.connected = False
                self.w.lost(call, why)
        self.streams.clear()
        self.queued.clear()
        self.blocked.clear()

    def _close(self, why: BaseException | None) -> None:
        """End the connection; connection_lost reports it to the calls still attached."""
        if self.linger is not None:
            self.linger.cancel()
            self.linger = None
        self.abandoned.clear()
        self.closed = True
        self.why = self.why or why
        tr, self.tr = self.tr, None
        if tr is not None:
            tr.abort()
        else:
            self.dialer.gone(self)

    def data_received(self, data: bytes) -> None:
        try:
            for kind, flags, stream, payload in self.frames.feed(data):
                if self.tr is None:
                    return
                if kind == http2.DATA:
                    self._data(flags, stream, payload)
                elif kind == http2.HEADERS and flags & WHOLE_BLOCK == http2.END_HEADERS and not self.block:
                    # a whole header block in one frame, neither padded nor with a priority: as it is
                    self.block_ends = bool(flags & http2.END_STREAM)
                    self._block(stream, self.hpack.decode_dict(payload))
                elif kind in (http2.HEADERS, http2.CONTINUATION):
                    self._headers(kind, flags, stream, payload)
                elif self.block:
                    raise http2.ProtocolError("a frame inside a header block")
                elif kind == http2.WINDOW_UPDATE:  # the server's, after each request it reads
                    self._window(stream, payload)
                elif kind == http2.SETTINGS:
                    self._settings(flags, payload)
                elif kind == http2.PING:
                    if len(payload) != 8:
                        raise http2.ProtocolError(f"a PING of {len(payload)} bytes", http2.FRAME_SIZE_ERROR)
                    if not flags & http2.ACK:
                        self._control(http2.frame(http2.PING, http2.ACK, 0, payload))
                elif kind == http2.RST_STREAM:
                    self._reset(stream, payload)
                elif kind == http2.GOAWAY:
                    self._goaway(payload)
                elif kind == http2.PUSH_PROMISE:
                    raise http2.ProtocolError("a PUSH_PROMISE, which our SETTINGS refused")
        except http2.ProtocolError as exc:
            if self.tr is not None:  # RFC 9113's connection error: GOAWAY with its code, then close
                self.tr.write(http2.goaway(exc.code))
            self._fail(f"not HTTP/2 we can follow: {exc}")

    def _fail(self, message: str, kind: str = BAD_RESPONSE) -> None:
        """A connection error: each call in flight fails with ``message``, the others are lost."""
        self.why = self.why or ConnectionResetError(message)
        for call in [c for c in self.calls if c.busy]:
            self.w.failed(call, kind, message)  # it aborts the call: it leaves the link
        self._close(None)

    def _call(self, stream: int) -> GrpcCall | None:
        """The call of an open ``stream``; None for one that ended (a reset call's late frames)."""
        call = self.streams.get(stream)
        if call is None and (stream == 0 or stream >= self.next_id or not stream & 1):
            raise http2.ProtocolError(f"a frame on stream {stream}, which we never opened")
        return call

    def _data(self, flags: int, stream: int, payload: bytes) -> None:
        self.unacked += len(payload)
        if self.unacked >= WINDOW // 2:
            self.tr.write(http2.window_update(0, self.unacked))
            self.unacked = 0
        call = self._call(stream)
        if call is None:
            if flags & http2.END_STREAM and stream in self.abandoned:
                self._settle(stream)
            return
        call.unacked += len(payload)
        if call.unacked >= WINDOW // 2:  # an answer past half a GiB: the cap decides, not our window
            self.tr.write(http2.window_update(stream, call.unacked))
            call.unacked = 0
        body = call.body
        body += http2.unpadded(flags, payload) if flags & http2.PADDED else payload
        if len(body) >= 5:
            if body[0]:
                self._refuse(call, MALFORMED_ANSWER, "a compressed gRPC message, which we did not ask for", reset=True)
                return
            size = int.from_bytes(body[1:5], "big")
            if size > self.dialer.payload.max_answer:
                self._refuse(call, RESPONSE_TOO_LARGE, f"response_too_large: a gRPC message of {size} bytes, past "
                             f"the cap of {self.dialer.payload.max_answer} bytes", reset=True)
                return
        if flags & http2.END_STREAM:
            self._refuse(call, BAD_RESPONSE, "the server ended the gRPC call without a status")

    def _headers(self, kind: int, flags: int, stream: int, payload: bytes) -> None:
        """A header block in parts (CONTINUATION frames), or padded, or with a priority."""
        if kind == http2.HEADERS:
            if self.block:
                raise http2.ProtocolError("a HEADERS frame inside a header block")
            payload = http2.unpadded(flags, payload)
            if flags & http2.PRIORITY_FLAG:
                payload = payload[5:]
            self.block_stream = stream
            self.block_ends = bool(flags & http2.END_STREAM)
        elif not self.block or stream != self.block_stream:
            raise http2.ProtocolError("a CONTINUATION with no header block")
        self.block += payload
        if len(self.block) > http2.MAX_HEADER_BLOCK:
            raise http2.ProtocolError("a header block past 1 MiB")
        if not flags & http2.END_HEADERS:
            return
        headers = self.hpack.decode_dict(bytes(self.block))  # every block: the table is the connection's
        self.block = bytearray()
        self._block(stream, headers)

    def _block(self, stream: int, headers: dict[str, str]) -> None:
        """A header block of ``stream``, decoded: the answer's headers, or its trailers."""
        call = self._call(stream)
        if call is None:
            if self.block_ends and stream in self.abandoned:
                self._settle(stream)
            return
        if not call.headers_seen:
            call.headers_seen = True
            call.first_ns = arrival(self.tr, self.w.selector, call.sent_ns)
            call.unread_ns = 0  # the kernel's receive time: the wait since is ours, counted from first_ns
            status = headers.get(":status", "200")
            if status != "200":
                said = REJECTED if status.startswith("4") else SERVER_ERROR
                self._refuse(call, said, f"HTTP {status} to the gRPC call", reset=not self.block_ends)
                return
            content = headers.get("content-type", "application/grpc")
            if not content.startswith("application/grpc"):
                self._refuse(call, BAD_RESPONSE, f"a {content!r} answer to the gRPC call", reset=not self.block_ends)
                return
        if self.block_ends:  # trailers (or a status alone): the call is over
            self._finish(call, headers)

    def _finish(self, call: GrpcCall, trailers: dict[str, str]) -> None:
        """The server ended ``call``'s stream with ``trailers``: its answer, its refusal or a loss."""
        code = trailers.get("grpc-status", "")
        if code != "0":
            name, details = status_of(trailers)
            if name in BROKEN:  # as grpcio reports a broken connection: the call is lost
                self._lose(call, ConnectionResetError(status_line(trailers)))
            else:
                self._refuse(call, error_kind(name, details), status_line(trailers))
            return
        body = call.body
        size = int.from_bytes(body[1:5], "big") if len(body) >= 5 else -1
        if size < 0 or len(body) != 5 + size:
            said = "no message" if not body else f"{len(body)} bytes that are not one gRPC message"
            self._refuse(call, MALFORMED_ANSWER, f"an OK answer with {said}")
            return
        dialer = self.dialer
        layout = dialer.layouts.known(body)  # the bytes of an answer that passed, but for its outputs' values
        reply: Any = None
        if layout is None:
            try:
                reply = dialer.parse(bytes(body[5:]))
            except Exception as exc:  # whatever the message makes the parser raise: the server's answer
                self._refuse(call, MALFORMED_ANSWER, f"a gRPC message that does not parse: {first_line(exc)}")
                return
            problem = check_answer(reply, dialer.payload.outputs)
            if problem is not None:
                self._refuse(call, MALFORMED_ANSWER, problem)
                return
            dialer.layouts.learn(body, 5, reply)
        values = dialer.values
        if values is not None:
            raws = (layout.outputs(body) if layout is not None else
                    dict(zip((o.name for o in reply.outputs), reply.raw_output_contents, strict=True)))
            problem = values.check_raw(raws, call.sent_index)
            if problem is not None:
                self._refuse(call, WRONG_ANSWER, problem)
                return
        self._end_stream(call)
        if call.cursor is not None:
            call.cursor.answered += 1
        self.w.answered(call, self.draining)

    def _refuse(self, call: GrpcCall, kind: str, problem: str, reset: bool = False) -> None:
        """``call`` ends with an error answer; ``reset``: its stream is still open, we end it."""
        if not call.first_ns or call.first_ns < call.sent_ns:
            call.first_ns = monotonic_ns()
        if call.cursor is not None and DROPPED_TEXT in problem:  # Triton no longer held the call's sequence
            kind, problem = SEQUENCE_DROPPED, dropped_line(problem, call.cursor.id, call.cursor.sequences.plan.idle_us)
        self._end_stream(call, reset=reset)
        self.w.rejected(call, kind, problem, self.draining)

    def _reset(self, stream: int, payload: bytes) -> None:
        call = self._call(stream)
        if call is None and stream in self.abandoned:
            self._settle(stream)
        elif call is not None:
            code = int.from_bytes(payload[:4], "big")
            self._lose(call, ConnectionResetError(f"the server reset the gRPC stream (HTTP/2 error {code})"))

    def _goaway(self, payload: bytes) -> None:
        last = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
        code = int.from_bytes(payload[4:8], "big")
        if code:
            self._close(ConnectionResetError(f"the server closed the HTTP/2 connection (GOAWAY, error {code})"))
            return
        # a graceful goodbye: the calls it took may still end; those past ``last`` it never saw
        self.draining = True
        unseen = ConnectionResetError("the server closed the HTTP/2 connection (GOAWAY) before this call")
        for sid in [s for s in self.streams if s > last]:
            self._lose(self.streams[sid], unseen)
        for call in list(self.queued):
            self._lose(call, unseen)
        if self.tr is not None:
            self._drain()
            if not self.streams:
                self._close(ConnectionResetError("the server closed the HTTP/2 connection (GOAWAY)"))

    def _settings(self, flags: int, payload: bytes) -> None:
        if flags & http2.ACK:
            return
        values = http2.parse_settings(payload)
        http2.check_settings(values)  # out of bounds: a connection error naming the setting
        if http2.INITIAL_WINDOW_SIZE in values:
            window = values[http2.INITIAL_WINDOW_SIZE]
            delta, self.peer_window = window - self.peer_window, window
            for call in self.streams.values():
                call.window += delta
                if call.window > http2.MAX_WINDOW:
                    raise http2.ProtocolError(f"the server's SETTINGS_INITIAL_WINDOW_SIZE of {window} takes a "
                                              "stream's window past 2^31-1", http2.FLOW_CONTROL_ERROR)
        if http2.MAX_FRAME_SIZE in values:
            self.max_frame = values[http2.MAX_FRAME_SIZE]
        if http2.MAX_CONCURRENT_STREAMS in values:
            self.max_streams = min(LINK_STREAMS, values[http2.MAX_CONCURRENT_STREAMS])
        self._control(http2.frame(http2.SETTINGS, http2.ACK, 0))
        if not self.ready.done():
            self.ready.set_result(None)
        self._flush()
        self._next_queued()

    def _control(self, answer: bytes) -> None:
        """Write the answer to a PING or SETTINGS, unless the peer floods them or does not read
        what we write (each answer would wait in our memory): then the connection is lost."""
        tr = self.tr
        self.controls += 1
        if self.controls > MAX_CONTROL_FRAMES:
            now = monotonic_ns()
            if now - self.controls_ns < CONTROL_INTERVAL_NS:
                raise http2.ProtocolError(f"a flood of control frames: more than {MAX_CONTROL_FRAMES} PING/SETTINGS "
                                          "in a second", http2.ENHANCE_YOUR_CALM)
            self.controls, self.controls_ns = 1, now
        if not tr.get_write_buffer_size():
            self.controls_queued = 0
        self.controls_queued += len(answer)
        if self.controls_queued > MAX_CONTROL_QUEUED:
            raise http2.ProtocolError(f"a peer that does not read: {self.controls_queued} bytes of PING/SETTINGS "
                                      "answers queued unread", http2.ENHANCE_YOUR_CALM)
        tr.write(answer)

    def _window(self, stream: int, payload: bytes) -> None:
        increment = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
        if stream == 0:
            self.send_conn += increment
            if self.send_conn > http2.MAX_WINDOW:
                raise http2.ProtocolError("a WINDOW_UPDATE past 2^31-1", http2.FLOW_CONTROL_ERROR)
        else:
            call = self.streams.get(stream)
            if call is not None:
                call.window += increment
                if call.window > http2.MAX_WINDOW:  # a stream error in the RFC: that call is refused
                    self._refuse(call, BAD_RESPONSE, "a WINDOW_UPDATE past 2^31-1 on the call's stream", reset=True)
        if self.blocked:
            self._flush()


class GrpcDialer(TcpDialer):
    """A load worker's calls, and the HTTP/2 connections they share."""

    alpn = ("h2",)
    stamped = True

    def __init__(self, scheduler: Scheduler, payload: GrpcPayload) -> None:
        host, port = payload.address.rsplit(":", 1)
        super().__init__(scheduler, host.strip("[]"), int(port), payload.tls)
        self.payload = payload
        self.parse = messages().ModelInferResponse.FromString
        self.cycle = RequestCycle(len(payload.requests), scheduler.index)  # shared by the worker's calls
        plan = payload.sequence
        if plan is not None:  # the worker's place in the streams, and its sequence ids
            streams = RequestCycle(len(plan.streams), scheduler.index) if plan.streams else self.cycle
            self.sequences = Sequences(plan, scheduler.index, streams)
        self.values = AnswerCheck(payload.values) if payload.values is not None else None
        self.head_block = http2.encode_headers(request_headers(payload.address, payload.tls, payload.metadata))
        self.headers_head = len(self.head_block).to_bytes(3, "big") + bytes((http2.HEADERS, http2.END_HEADERS))
        # each request as its gRPC message (uncompressed, length-prefixed), framed once, and the
        # head of the DATA frame (length, type, END_STREAM) that carries it whole
        self.messages = tuple(b"\x00" + len(r).to_bytes(4, "big") + r for r in payload.requests)
        self.data_heads = tuple(len(m).to_bytes(3, "big") + bytes((http2.DATA, http2.END_STREAM)) for m in self.messages)
        self.layouts = ReplyLayouts()  # answers that passed their check, shared by the worker's links
        self.links: list[GrpcLink] = []
        self.ending = False  # the level is ending: its calls leave (GrpcLink.detach)

    def connection(self) -> GrpcCall:
        plan = self.payload.sequence
        if plan is not None:
            return SequenceGrpcCall(self.w, self, plan, self.sequences)
        return GrpcCall(self.w, self)

    def gone(self, link: GrpcLink) -> None:
        if link in self.links:
            self.links.remove(link)

    async def open(self, conns: list[Connection], at_ns: int) -> BaseException | None:
        """Attach each call to a link with room, opening new links (tightly, as TcpDialer opens
        sockets) for the rest; a call is connected once its link has the server's SETTINGS."""
        calls = [c for c in conns if isinstance(c, GrpcCall)]
        fresh: list[GrpcLink] = []
        for call in calls:
            link = next((x for x in (*self.links, *fresh) if x.room > 0), None)
            if link is None:
                link = GrpcLink(self)
                fresh.append(link)
            link.attach(call)
        self.links.extend(fresh)
        error: BaseException | None = None
        if fresh:
            error = await super().open(fresh, at_ns)  # type: ignore[arg-type]  # links are its protocols
            for link in fresh:
                if link.tr is None and not link.closed:  # never connected
                    link.closed = True
                    self.gone(link)
        placed = [(call, call.link) for call in calls if call.link is not None]
        plan = self.w.plan
        waiting = {link.ready for _, link in placed if not link.closed}
        if waiting:
            _, late = await asyncio.wait(waiting, timeout=plan.timeout_ns / 1e9 if plan is not None else 10.0)
            if late:
                error = error or TimeoutError("no HTTP/2 SETTINGS from the server in time")
        for call, link in placed:
            ready = link.ready
            failure = ready.exception() if ready.done() else None
            if call.link is link and ready.done() and failure is None and not link.closed and not link.draining:
                call.connected = True
                continue
            if link.draining and not failure:  # the server said GOAWAY meanwhile: the next try opens another
                failure = ConnectionResetError("the server closed the HTTP/2 connection (GOAWAY)")
            error = error or failure or ConnectionRefusedError(f"cannot connect to {self.payload.address} over gRPC")
            if call.link is link:
                call.link = None
                link.detach(call)
        return error

    def level_ends(self) -> None:
        self.ending = True

    def forget(self) -> None:
        super().forget()
        self.ending = False
        if self.payload.sequence is not None:  # the level's unfinished sequences go to the next level's calls
            self.sequences.reclaim()
        for link in list(self.links):
            if not link.calls:
                link._idle()

    async def settle(self) -> None:
        while any(link.abandoned for link in self.links):  # each link closes within LINGER_S
            await asyncio.sleep(0.005)


class GrpcTransport(GrpcRequests):
    def dialer(self, scheduler: Scheduler, payload: Any) -> Dialer:
        return GrpcDialer(scheduler, payload)


TRANSPORT = GrpcTransport()
