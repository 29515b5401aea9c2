"""grpc_stream's HTTP/2 connection on frames a test writes (pure protocol logic, no server): what
Triton's own streams rarely show. A stream the server ends with a gRPC status, resets or closes
with GOAWAY is lost with the server's words; a graceful GOAWAY lets the request in flight end; a
request past the server's flow-control window waits for its WINDOW_UPDATE; PINGs are answered;
a response of another request is not this one's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from engine.net import http2
from engine.triton.transports import grpc_stream
from engine.triton.transports.grpc import GrpcPayload, messages
from engine.triton.transports.grpc_stream import FINAL, STREAM, GrpcStreamDialer


class Scheduler:
    index = 0
    generation = 0
    plan = None
    loop = None
    selector = SimpleNamespace(returned=0)

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def answered(self, conn: Any, close: bool) -> None:
        conn.busy = False
        self.calls.append(("answered", close))

    def rejected(self, conn: Any, kind: str, message: str, close: bool) -> None:
        conn.busy = False
        self.calls.append(("rejected", kind, message, close))

    def failed(self, conn: Any, kind: str, message: str) -> None:
        conn.busy = False
        self.calls.append(("failed", kind, message))
        conn.abort()

    def lost(self, conn: Any, exc: BaseException | None) -> None:
        self.calls.append(("lost", str(exc)))


class Transport:
    def __init__(self) -> None:
        self.out = bytearray()
        self.aborted = False
        self.unread = 0  # bytes the peer has not read (asyncio's write buffer)

    def write(self, data: bytes) -> None:
        self.out += data

    def get_write_buffer_size(self) -> int:
        return self.unread

    def abort(self) -> None:
        self.aborted = True


def connect(request: bytes = b"\x0a\x07toy_llm") -> tuple[Any, Scheduler, Transport]:
    scheduler = Scheduler()
    payload = GrpcPayload("127.0.0.1:8001", False, (request,), (("authorization", "Bearer x"),),
                          (("TOKEN", "BYTES"),), 1 << 20)
    conn = GrpcStreamDialer(scheduler, payload).connection()  # type: ignore[arg-type]
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, scheduler, transport


def sent_frames(transport: Transport) -> list[tuple[int, int, int, bytes]]:
    out = bytes(transport.out)
    assert out.startswith(http2.PREFACE)
    return http2.FrameReader().feed(out[len(http2.PREFACE):])


def response(request_id: str, final: bool, token: bytes = b"the") -> bytes:
    reply = messages().ModelStreamInferResponse()
    r = reply.infer_response
    r.id = request_id
    if token:
        out = r.outputs.add()
        out.name, out.datatype = "TOKEN", "BYTES"
        out.shape.append(1)
        r.raw_output_contents.append(len(token).to_bytes(4, "little") + token)
    r.parameters[FINAL].bool_param = final
    body = reply.SerializeToString()
    return http2.frame(http2.DATA, 0, STREAM, b"\0" + len(body).to_bytes(4, "big") + body)


def headers(fields: list[tuple[str, str]], end: bool) -> bytes:
    flags = http2.END_HEADERS | (http2.END_STREAM if end else 0)
    return http2.frame(http2.HEADERS, flags, STREAM, http2.encode_headers(fields))


def test_it_opens_one_stream_with_grpcs_headers_and_our_metadata() -> None:
    _, _, transport = connect()
    frames = sent_frames(transport)
    assert [f[0] for f in frames] == [http2.SETTINGS, http2.WINDOW_UPDATE, http2.HEADERS]
    fields = dict(http2.HpackDecoder().decode(frames[2][3]))
    assert fields[":path"] == "/inference.GRPCInferenceService/ModelStreamInfer"
    assert fields["content-type"] == "application/grpc" and fields["te"] == "trailers"
    assert fields["authorization"] == "Bearer x"
    assert not frames[2][1] & http2.END_STREAM  # the stream stays open for every request


def test_a_request_is_answered_at_its_final_response_and_others_are_ignored() -> None:
    conn, scheduler, _ = connect()
    conn.send()
    conn.data_received(headers([(":status", "200"), ("content-type", "application/grpc")], False))
    conn.data_received(response("other", True) + response(conn.current, False))
    assert conn.times.responses == 1 and not scheduler.calls
    conn.data_received(response(conn.current, True, b""))  # Triton's empty final response
    assert scheduler.calls == [("answered", False)]
    assert conn.times.responses == 1


def test_a_status_in_the_trailers_loses_the_stream_with_the_servers_words() -> None:
    conn, scheduler, transport = connect()
    conn.send()
    conn.data_received(headers([(":status", "200"), ("content-type", "application/grpc")], False)
                       + headers([("grpc-status", "14"), ("grpc-message", "shutting%20down")], True))
    assert transport.aborted
    conn.connection_lost(None)
    assert scheduler.calls == [("lost", "gRPC UNAVAILABLE: shutting down")]


def test_a_reset_stream_and_a_goaway_with_an_error_are_lost() -> None:
    conn, scheduler, _ = connect()
    conn.send()
    conn.data_received(http2.frame(http2.RST_STREAM, 0, STREAM, (2).to_bytes(4, "big")))
    conn.connection_lost(None)
    conn, scheduler2, _ = connect()
    conn.send()
    conn.data_received(http2.frame(http2.GOAWAY, 0, 0, (0).to_bytes(4, "big") + (2).to_bytes(4, "big")))
    conn.connection_lost(None)
    assert scheduler.calls == [("lost", "the server reset the gRPC stream (HTTP/2 error 2)")]
    assert scheduler2.calls == [("lost", "the server closed the HTTP/2 connection (GOAWAY, error 2)")]


def test_a_graceful_goaway_lets_the_request_in_flight_end_then_closes() -> None:
    conn, scheduler, _ = connect()
    conn.send()
    conn.data_received(http2.frame(http2.GOAWAY, 0, 0, STREAM.to_bytes(4, "big") + bytes(4)))
    conn.data_received(response(conn.current, True))
    assert scheduler.calls == [("answered", True)]  # close: the scheduler opens a new connection


def test_a_request_past_the_servers_window_waits_for_its_window_update() -> None:
    conn, _, transport = connect()
    conn.data_received(http2.settings_frame({http2.INITIAL_WINDOW_SIZE: 10}))
    before = len(transport.out)
    conn.send()
    frames = http2.FrameReader().feed(bytes(transport.out[before:]))
    data = b"".join(f[3] for f in frames if f[0] == http2.DATA)
    assert len(data) == 10 and conn.pending  # the window's worth, the rest waiting
    conn.data_received(http2.window_update(STREAM, 1000))
    frames = http2.FrameReader().feed(bytes(transport.out[before:]))
    data = b"".join(f[3] for f in frames if f[0] == http2.DATA)
    assert not conn.pending and int.from_bytes(data[1:5], "big") == len(data) - 5  # one whole gRPC message
    assert conn.written_ns >= conn.sent_ns


def test_settings_are_acknowledged_and_pings_answered() -> None:
    conn, _, transport = connect()
    before = len(transport.out)
    conn.data_received(http2.settings_frame({http2.MAX_CONCURRENT_STREAMS: 100})
                       + http2.frame(http2.PING, 0, 0, b"12345678"))
    frames = http2.FrameReader().feed(bytes(transport.out[before:]))
    assert (http2.SETTINGS, http2.ACK, 0, b"") in frames
    assert (http2.PING, http2.ACK, 0, b"12345678") in frames


def test_a_compressed_message_and_one_past_the_cap_are_refused() -> None:
    conn, scheduler, _ = connect()
    conn.send()
    conn.data_received(http2.frame(http2.DATA, 0, STREAM, b"\x01\0\0\0\x01x"))
    conn, scheduler2, _ = connect()
    conn.send()
    conn.data_received(http2.frame(http2.DATA, 0, STREAM, b"\0" + (2 << 20).to_bytes(4, "big")))
    assert scheduler.calls[0][:2] == ("failed", "malformed_answer")
    assert scheduler2.calls[0][:2] == ("failed", "response_too_large")


def test_bytes_that_are_not_http2_fail_the_connection() -> None:
    conn, scheduler, transport = connect()
    conn.send()
    conn.data_received(http2.frame(http2.DATA, 0, 3, b""))  # DATA on a stream we never opened
    assert scheduler.calls[0][0] == "failed" and "not HTTP/2 we can follow" in scheduler.calls[0][2]
    assert transport.aborted


def test_a_window_past_2_31_and_a_ping_of_the_wrong_size_are_connection_errors() -> None:
    conn, scheduler, transport = connect()
    conn.send()
    conn.data_received(http2.window_update(0, http2.MAX_WINDOW))  # ours starts at 65535: past 2^31-1
    conn, scheduler2, transport2 = connect()
    conn.send()
    conn.data_received(http2.frame(http2.PING, 0, 0, b"1234"))
    assert scheduler.calls[0][0] == "failed" and "WINDOW_UPDATE past 2^31-1" in scheduler.calls[0][2]
    assert http2.goaway(http2.FLOW_CONTROL_ERROR) in transport.out
    assert scheduler2.calls[0][0] == "failed" and "a PING of 4 bytes" in scheduler2.calls[0][2]
    assert http2.goaway(http2.FRAME_SIZE_ERROR) in transport2.out


def test_control_frames_past_a_thousand_a_second_or_answers_nobody_reads_lose_the_connection(monkeypatch) -> None:
    ping = http2.frame(http2.PING, 0, 0, b"12345678")
    conn, scheduler, _ = connect()
    conn.data_received(ping * 1000)
    assert not scheduler.calls  # a thousand in a second are answered
    conn.data_received(ping)
    assert scheduler.calls[0][0] == "failed" and "a flood of control frames" in scheduler.calls[0][2]
    monkeypatch.setattr(grpc_stream, "MAX_CONTROL_FRAMES", 1 << 60)  # the rate cap off: the bytes cap alone
    conn, scheduler, transport = connect()
    transport.unread = 1  # the peer reads nothing of what we write
    conn.data_received(ping * 20000)  # 17 bytes an answer: past the 256 KiB cap
    assert scheduler.calls[0][0] == "failed" and "a peer that does not read" in scheduler.calls[0][2]
    assert len(transport.out) < grpc_stream.MAX_CONTROL_QUEUED + 1000
