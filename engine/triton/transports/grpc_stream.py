"""load.transport = grpc_stream: Triton's ``ModelStreamInfer``, one bidirectional gRPC stream per connection, for decoupled models that answer a request with a stream of responses.

As perf_analyzer's ``-i grpc --streaming``, over our own HTTP/2 (engine/net/http2.py): a request's
frames leave in ``send()`` itself, where grpc.aio took about 0.25 ms before its bytes left
(docs/results/toy_llm_streaming.md). The requests are the grpc transport's serialised
``ModelInferRequest``s (built once in the session, with Triton's
``triton_enable_empty_final_response`` set so that every request ends with a response flagged
``triton_final_response``); each send prefixes the request's id, a protobuf field that the
parser merges, so a response is known for the current request's. A connection carries one
request at a time: it takes the stream's responses, checks each one (the grpc transport's answer
check; an empty final response carries no outputs), times the first (TTFT) and the gaps between
them (ITL), and reports the request answered at its final response; with validation data, the
last response that carries outputs is compared with it (a stream's answer is its last response,
as perf_analyzer's ``validation_data`` reads it). An error response refuses it (``rejected``); a
stream or connection that ends with a request in flight is lost (``connection_reset``, with
the server's gRPC status where it sent one), never a shorter answer. A server that breaks
HTTP/2's rules (SETTINGS out of bounds, a window past 2^31-1) or floods us with PING/SETTINGS is
a connection error: GOAWAY with its code, and the request fails in the server's words.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from engine.net import http2
from engine.net.connection import (
    BAD_RESPONSE,
    MALFORMED_ANSWER,
    REJECTED,
    RESPONSE_TOO_LARGE,
    WRONG_ANSWER,
    Connection,
    Dialer,
    RequestCycle,
    Scheduler,
    StreamTimes,
    first_line,
)
from engine.net.stamped_socket import arrival
from engine.net.tcp import TcpDialer
from engine.triton.answer_check import AnswerCheck
from engine.triton.transports import Prepared, SweepInputs, raw_token_count, token_count_problem
from engine.triton.transports.grpc_common import (
    GrpcPayload,
    GrpcRequests,
    check_answer,
    messages,
    status_line,
)

monotonic_ns = time.monotonic_ns
METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"
FINAL = "triton_final_response"  # Triton's parameter on each response of a decoupled model's stream
ENABLE_EMPTY_FINAL = "triton_enable_empty_final_response"
STREAM = 1  # the connection's one stream
# our receive window, connection and stream: large, so a server is never held back by it; given
# back once half is used
WINDOW = 1 << 30
# a peer's control frames (PING, SETTINGS) we answer: at most this many a second, and at most this
# many bytes of answers queued while the peer does not read (RFC 9113 section 10.5); past either the
# connection is lost. gRPC servers send a handful a second (keepalive, BDP probes).
MAX_CONTROL_FRAMES = 1000
CONTROL_INTERVAL_NS = 1_000_000_000
MAX_CONTROL_QUEUED = 256 << 10



def split_address(address: str) -> tuple[str, int]:
    """host and port of "host:port" or "[v6]:port"."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def stream_headers(authority: str, tls: bool, metadata: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    return [(":method", "POST"), (":scheme", "https" if tls else "http"), (":path", METHOD), (":authority", authority),
            ("content-type", "application/grpc"), ("te", "trailers"),
            *((k.lower(), v) for k, v in metadata)]


class GrpcStreamConnection(Connection, asyncio.Protocol):
    """One TCP connection speaking HTTP/2, with one open ModelStreamInfer stream."""

    def __init__(self, scheduler: Scheduler, dialer: GrpcStreamDialer) -> None:
        super().__init__(scheduler)
        self.dialer = dialer
        self.payload = dialer.payload
        self.tr: asyncio.Transport | None = None
        self.sent_index = 0  # which of the sweep's requests it is (validation data)
        self.serial = 0
        self.times = StreamTimes()  # the request in flight's (``stream`` to the scheduler)
        self.stream = self.times
        self.last: Any = None  # the request in flight's last response with outputs
        self._fresh()

    def _fresh(self) -> None:
        """A new connection's state."""
        self.frames = http2.FrameReader()
        self.hpack = http2.HpackDecoder()
        self.block = bytearray()  # a header block awaiting its CONTINUATION frames
        self.block_ends = False  # whether that block's HEADERS frame ended the stream
        self.headers_seen = False
        self.messages = bytearray()  # the stream's DATA, not yet whole gRPC messages
        self.unacked = 0  # DATA bytes received since our last WINDOW_UPDATE
        self.send_conn = self.send_stream = http2.DEFAULT_WINDOW
        self.peer_window = http2.DEFAULT_WINDOW  # the server's initial stream window
        self.max_frame = http2.DEFAULT_MAX_FRAME
        self.pending = b""  # request bytes the server's windows do not take yet
        self.why: BaseException | None = None  # why we closed it, for connection_lost
        self.draining = False  # the server said GOAWAY: close once the request in flight ends
        self.current = ""  # id of the request in flight ("" none)
        self.controls = 0  # control frames answered since controls_ns
        self.controls_ns = monotonic_ns()
        self.controls_queued = 0  # bytes of those answers written since the write buffer was last empty

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = transport  # type: ignore[assignment]
        self._fresh()
        self.connected = True
        hello = http2.settings_frame({http2.ENABLE_PUSH: 0, http2.INITIAL_WINDOW_SIZE: WINDOW})
        transport.write(http2.PREFACE + hello + http2.window_update(0, WINDOW - http2.DEFAULT_WINDOW)  # type: ignore[attr-defined]
                        + self.dialer.open_stream)

    def connection_lost(self, exc: Exception | None) -> None:
        self.tr = None
        self.connected = False
        self.current = ""
        self.w.lost(self, exc or self.why)

    def data_received(self, data: bytes) -> None:
        try:
            for kind, flags, stream, payload in self.frames.feed(data):
                if self.tr is None:
                    return
                if kind == http2.DATA:
                    self._data(flags, stream, payload)
                elif kind in (http2.HEADERS, http2.CONTINUATION):
                    self._headers(kind, flags, stream, payload)
                elif self.block:
                    raise http2.ProtocolError("a frame inside a header block")
                elif kind == http2.SETTINGS:
                    self._settings(flags, payload)
                elif kind == http2.PING:
                    if len(payload) != 8:
                        raise http2.ProtocolError(f"a PING of {len(payload)} bytes", http2.FRAME_SIZE_ERROR)
                    if not flags & http2.ACK:
                        self._control(http2.frame(http2.PING, http2.ACK, 0, payload))
                elif kind == http2.WINDOW_UPDATE:
                    self._window(stream, payload)
                elif kind == http2.RST_STREAM:
                    code = int.from_bytes(payload[:4], "big")
                    self._close(ConnectionResetError(f"the server reset the gRPC stream (HTTP/2 error {code})"))
                elif kind == http2.GOAWAY:
                    self._goaway(payload)
                elif kind == http2.PUSH_PROMISE:
                    raise http2.ProtocolError("a PUSH_PROMISE, which our SETTINGS refused")
        except http2.ProtocolError as exc:
            if self.tr is not None:  # RFC 9113's connection error: GOAWAY with its code, then close
                self.tr.write(http2.goaway(exc.code))
            self._fail(f"not HTTP/2 we can follow: {exc}")

    def _data(self, flags: int, stream: int, payload: bytes) -> None:
        self.unacked += len(payload)
        if self.unacked >= WINDOW // 2:
            self.tr.write(http2.window_update(0, self.unacked) + http2.window_update(STREAM, self.unacked))  # type: ignore[union-attr]
            self.unacked = 0
        if stream != STREAM:
            raise http2.ProtocolError(f"DATA on stream {stream}")
        buf = self.messages
        buf += http2.unpadded(flags, payload)
        at, n = 0, len(buf)
        while n - at >= 5:
            size = int.from_bytes(buf[at + 1 : at + 5], "big")
            if buf[at]:
                self._fail("a compressed gRPC message, which we did not ask for", MALFORMED_ANSWER)
                return
            if size > self.payload.max_answer:
                self._fail(f"response_too_large: a gRPC message of {size} bytes, past the cap of "
                           f"{self.payload.max_answer} bytes", RESPONSE_TOO_LARGE)
                return
            if n - at - 5 < size:
                break
            try:
                self.take(self.dialer.parse(bytes(buf[at + 5 : at + 5 + size])))
            except Exception as exc:  # whatever the message makes the parser raise: the server's answer
                self._fail(f"a gRPC message that does not parse: {first_line(exc)}", MALFORMED_ANSWER)
                return
            at += 5 + size
            if self.tr is None:
                return
        if at:
            del buf[:at]
        if flags & http2.END_STREAM:
            self._close(ConnectionResetError("the server ended the gRPC stream without a status"))

    def _headers(self, kind: int, flags: int, stream: int, payload: bytes) -> None:
        if stream != STREAM:
            raise http2.ProtocolError(f"headers on stream {stream}")
        if kind == http2.HEADERS:
            if self.block:
                raise http2.ProtocolError("a HEADERS frame inside a header block")
            payload = http2.unpadded(flags, payload)
            if flags & http2.PRIORITY_FLAG:
                payload = payload[5:]
            self.block_ends = bool(flags & http2.END_STREAM)
        elif not self.block:
            raise http2.ProtocolError("a CONTINUATION with no header block")
        self.block += payload
        if len(self.block) > http2.MAX_HEADER_BLOCK:
            raise http2.ProtocolError("a header block past 1 MiB")
        if not flags & http2.END_HEADERS:
            return
        headers = dict(self.hpack.decode(bytes(self.block)))
        self.block = bytearray()
        first, self.headers_seen = not self.headers_seen, True
        if first and headers.get(":status", "200") != "200":
            self._close(ConnectionResetError(f"HTTP {headers.get(':status')} to the gRPC stream"))
        elif first and not headers.get("content-type", "application/grpc").startswith("application/grpc"):
            self._close(ConnectionResetError(f"a {headers.get('content-type')!r} answer to the gRPC stream"))
        elif self.block_ends:  # trailers (or a status alone): the stream is over
            code = headers.get("grpc-status", "")
            self._close(ConnectionResetError(status_line(headers) if code != "0" else
                                             "the server ended the gRPC stream"))

    def _settings(self, flags: int, payload: bytes) -> None:
        if flags & http2.ACK:
            return
        values = http2.parse_settings(payload)
        http2.check_settings(values)  # out of bounds: a connection error naming the setting
        if http2.INITIAL_WINDOW_SIZE in values:
            window = values[http2.INITIAL_WINDOW_SIZE]
            self.send_stream += window - self.peer_window
            self.peer_window = window
            if self.send_stream > http2.MAX_WINDOW:
                raise http2.ProtocolError(f"the server's SETTINGS_INITIAL_WINDOW_SIZE of {window} takes the stream's "
                                          "window past 2^31-1", http2.FLOW_CONTROL_ERROR)
        if http2.MAX_FRAME_SIZE in values:
            self.max_frame = values[http2.MAX_FRAME_SIZE]
        self._control(http2.frame(http2.SETTINGS, http2.ACK, 0))
        self._flush()

    def _control(self, answer: bytes) -> None:
        """Write the answer to a PING or SETTINGS, unless the peer floods them or does not read
        what we write (each answer would wait in our memory): then the connection is lost."""
        tr = self.tr
        assert tr is not None
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
        elif stream == STREAM:
            self.send_stream += increment
            if self.send_stream > http2.MAX_WINDOW:  # a stream error in the RFC; the stream is the connection's
                raise http2.ProtocolError("a WINDOW_UPDATE past 2^31-1", http2.FLOW_CONTROL_ERROR)
        self._flush()

    def _goaway(self, payload: bytes) -> None:
        last = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
        code = int.from_bytes(payload[4:8], "big")
        if last >= STREAM and code == 0 and self.busy:
            self.draining = True  # a graceful goodbye: the request in flight may still end
        else:
            self._close(ConnectionResetError(f"the server closed the HTTP/2 connection (GOAWAY, error {code})"))

    def _flush(self) -> None:
        """Send what the server's windows now take of the request bytes waiting."""
        if not self.pending or self.tr is None:
            return
        room = min(self.send_conn, self.send_stream)
        if room <= 0:
            return
        chunk, self.pending = self.pending[:room], self.pending[room:]
        self.send_conn -= len(chunk)
        self.send_stream -= len(chunk)
        self.tr.write(http2.data_frames(STREAM, chunk, self.max_frame))
        if not self.pending:
            self.written_ns = monotonic_ns()

    def take(self, reply: Any) -> None:
        """One message of the stream: a response of the request in flight, or an error."""
        response = reply.infer_response
        if not self.busy or response.id != self.current:
            return  # no request in flight: a response of one already ended
        now = arrival(self.tr, self.w.selector, self.sent_ns)
        if reply.error_message:
            text = " ".join(reply.error_message.split())[:200]
            self._refuse(REJECTED, f"gRPC stream error: {text}", now)
            return
        final = FINAL in response.parameters and response.parameters[FINAL].bool_param
        if response.outputs or not final:
            problem = check_answer(response, self.payload.outputs)
            if problem is not None:
                self._refuse(MALFORMED_ANSWER, problem, now)
                return
            tokens = 1
            counted = self.payload.tokens_from
            if counted is not None:
                raw = dict(zip((o.name for o in response.outputs), response.raw_output_contents, strict=False))
                found = raw_token_count(raw.get(counted[0], b""), counted[1])
                problem = token_count_problem(found, counted[0])
                if problem is not None:
                    self._refuse(MALFORMED_ANSWER, problem, now)
                    return
                tokens = found  # type: ignore[assignment]  # not None: checked
            self.times.add(now, tokens)
            self.last = response
        if final:
            self.current = ""
            self.first_ns = now  # the answer's time: the scheduler's split of the latency ends here
            if self.times.responses == 0:
                self._refuse(MALFORMED_ANSWER, "the stream ended the request with no response", now)
                return
            if self.dialer.values is not None:  # validation data: the last response's values, as perf_analyzer's
                last = self.last
                problem = self.dialer.values.check_raw(
                    dict(zip((o.name for o in last.outputs), last.raw_output_contents, strict=True)), self.sent_index)
                if problem is not None:
                    self._refuse(WRONG_ANSWER, problem, now)
                    return
            self.w.answered(self, self.draining)

    def _refuse(self, kind: str, problem: str, now: int) -> None:
        self.current = ""
        self.first_ns = now
        self.w.rejected(self, kind, problem, self.draining)

    def _close(self, why: BaseException) -> None:
        """End the connection; connection_lost reports it (lost, with ``why``)."""
        self.why = self.why or why
        self.abort()

    def _fail(self, message: str, kind: str = BAD_RESPONSE) -> None:
        self.current = ""
        self.why = self.why or ConnectionResetError(message)  # the loss's words, should no request be in flight
        self.w.failed(self, kind, message)  # it aborts the connection

    # -- Connection

    def send(self, intended_ns: int = 0) -> int:
        now = monotonic_ns()
        self.sent_ns = self.written_ns = now
        self.intended_ns = intended_ns or now
        self.busy = True
        self.serial += 1
        self.current = f"{self.w.index}.{self.serial}"
        self.sent_index = self.dialer.cycle.take()
        self.times = self.stream = StreamTimes()
        # the id first: a repeated scalar field merges, so the request's own bytes stay as built
        body = self.dialer.id_prefix(self.current) + self.payload.requests[self.sent_index]
        message = b"\x00" + len(body).to_bytes(4, "big") + body
        if self.pending or len(message) > min(self.send_conn, self.send_stream):
            self.pending += message  # the rest when the server's windows open (_flush)
            self._flush()
        elif self.tr is not None:
            self.send_conn -= len(message)
            self.send_stream -= len(message)
            self.tr.write(http2.data_frames(STREAM, message, self.max_frame))
        return now

    def abort(self) -> None:
        # asyncio reports the loss a loop pass later: no frame of this connection is read or
        # written meanwhile
        tr, self.tr = self.tr, None
        if tr is not None:
            tr.abort()


class GrpcStreamDialer(TcpDialer):
    alpn = ("h2",)
    stamped = True

    def __init__(self, scheduler: Scheduler, payload: GrpcPayload) -> None:
        host, port = split_address(payload.address)
        super().__init__(scheduler, host, port, payload.tls)
        self.payload = payload
        service_pb2 = messages()
        self.parse = service_pb2.ModelStreamInferResponse.FromString
        self._request = service_pb2.ModelInferRequest
        self.cycle = RequestCycle(len(payload.requests), scheduler.index)
        self.values = AnswerCheck(payload.values) if payload.values is not None else None
        block = http2.encode_headers(stream_headers(payload.address, payload.tls, payload.metadata))
        self.open_stream = http2.frame(http2.HEADERS, http2.END_HEADERS, STREAM, block)

    def id_prefix(self, request_id: str) -> bytes:
        return self._request(id=request_id).SerializeToString()

    def connection(self) -> GrpcStreamConnection:
        return GrpcStreamConnection(self.w, self)


class GrpcStreamTransport:
    async def prepare(self, sweep: SweepInputs) -> Prepared:
        prepared = await GrpcRequests().prepare(sweep)
        service_pb2 = messages()
        flag = service_pb2.ModelInferRequest()
        flag.parameters[ENABLE_EMPTY_FINAL].bool_param = True
        extra = flag.SerializeToString()  # merged into each request: map entries add up
        payload: GrpcPayload = prepared.payload
        payload.requests = tuple(r + extra for r in payload.requests)
        return Prepared(payload, prepared.request_bytes + len(extra), prepared.cleanup)

    def dialer(self, scheduler: Scheduler, payload: Any) -> Dialer:
        return GrpcStreamDialer(scheduler, payload)


TRANSPORT = GrpcStreamTransport()
