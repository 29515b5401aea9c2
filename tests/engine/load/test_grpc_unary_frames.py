"""grpc's HTTP/2 link on frames a test writes (protocol logic, no server): several calls in
flight on one connection, each answer matched to its request by stream; a gRPC status in the
trailers in the words the grpc.aio transport gave; a server's stream limit, reset, GOAWAY and closed
connection; a timed-out call's stream reset while its connection carries on."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace
from typing import Any

from engine.net import http2
from engine.triton.answer_check import AnswerSpec
from engine.triton.answer_values import Expected
from engine.triton.transports.grpc import GrpcDialer, GrpcLink
from engine.triton.transports.grpc_common import GrpcPayload, messages


class Scheduler:
    index = 0
    generation = 0
    plan = None
    selector = SimpleNamespace(returned=0)

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.calls: list[tuple[Any, ...]] = []

    def answered(self, conn: Any, close: bool) -> None:
        conn.busy = False
        self.calls.append(("answered", conn, close))

    def rejected(self, conn: Any, kind: str, message: str, close: bool) -> None:
        conn.busy = False
        self.calls.append(("rejected", conn, kind, message, close))

    def failed(self, conn: Any, kind: str, message: str) -> None:
        conn.busy = False
        self.calls.append(("failed", conn, kind, message))
        conn.abort()

    def lost(self, conn: Any, exc: BaseException | None) -> None:
        self.calls.append(("lost", conn, str(exc) if exc else None))


class Transport:
    def __init__(self) -> None:
        self.out = bytearray()
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.out += data

    def get_write_buffer_size(self) -> int:
        return 0

    def abort(self) -> None:
        self.aborted = True


def request(n: int) -> bytes:
    """Request ``n``: its id says which it is, so a server can answer it with its own value."""
    return messages().ModelInferRequest(model_name="identity", id=f"r{n}").SerializeToString()


def value(n: int) -> bytes:
    return struct.pack("<f", float(n))


def link_of(calls: int, requests: int = 3, values: bool = True,
            settings: dict[int, int] | None = None) -> tuple[Any, list[Any], Scheduler, Transport]:
    """``calls`` calls on one link that has the server's SETTINGS (``settings``)."""
    scheduler = Scheduler()
    spec = AnswerSpec({}, expected=tuple({"OUTPUT0": Expected("FP32", value(n))} for n in range(requests)),
                      labels=tuple(f"entry {n}" for n in range(requests))) if values else None
    payload = GrpcPayload("127.0.0.1:8001", False, tuple(request(n) for n in range(requests)),
                          (("authorization", "Bearer x"),), (("OUTPUT0", "FP32"),), 1 << 20, spec)
    dialer = GrpcDialer(scheduler, payload)  # type: ignore[arg-type]
    link = GrpcLink(dialer)
    conns = [dialer.connection() for _ in range(calls)]
    for conn in conns:
        link.attach(conn)
        conn.connected = True
    transport = Transport()
    link.connection_made(transport)  # type: ignore[arg-type]
    link.data_received(http2.settings_frame(settings or {}))
    assert link.ready.done()
    return link, conns, scheduler, transport


def written(transport: Transport, since: int = 0) -> list[tuple[int, int, int, bytes]]:
    out = bytes(transport.out[since:])
    if out.startswith(http2.PREFACE):
        out = out[len(http2.PREFACE):]
    return http2.FrameReader(1 << 24).feed(out)


def requests_by_stream(transport: Transport) -> dict[int, str]:
    """Which request (its id) went on each stream, as a server reads them."""
    seen = {}
    for kind, flags, stream, payload in written(transport):
        if kind == http2.DATA:
            assert flags & http2.END_STREAM and int.from_bytes(payload[1:5], "big") == len(payload) - 5
            seen[stream] = messages().ModelInferRequest.FromString(payload[5:]).id
    return seen


def headers(stream: int, fields: list[tuple[str, str]], end: bool) -> bytes:
    flags = http2.END_HEADERS | (http2.END_STREAM if end else 0)
    return http2.frame(http2.HEADERS, flags, stream, http2.encode_headers(fields))


OK_HEAD = [(":status", "200"), ("content-type", "application/grpc")]


def answer(stream: int, n: int, status: str = "0", said: int | None = None, datatype: str = "FP32") -> bytes:
    """The whole answer to request ``n`` on ``stream``: headers, one message holding ``value(said)``
    (``value(n)`` unless told), trailers."""
    reply = messages().ModelInferResponse(model_name="identity", id=f"r{n}")
    out = reply.outputs.add()
    out.name, out.datatype = "OUTPUT0", datatype
    out.shape.append(1)
    reply.raw_output_contents.append(value(n if said is None else said))
    body = reply.SerializeToString()
    return (headers(stream, OK_HEAD, False)
            + http2.frame(http2.DATA, 0, stream, b"\0" + len(body).to_bytes(4, "big") + body)
            + headers(stream, [("grpc-status", status)], True))


async def test_calls_share_one_connection_each_on_its_own_stream_and_answers_find_their_requests() -> None:
    link, conns, scheduler, transport = link_of(3)
    for conn in conns:
        conn.send()
    sent = requests_by_stream(transport)
    assert sent == {1: "r0", 3: "r1", 5: "r2"}  # three streams in flight on one socket
    fields = [dict(http2.HpackDecoder().decode(p)) for k, _, _, p in written(transport) if k == http2.HEADERS]
    assert all(f[":path"] == "/inference.GRPCInferenceService/ModelInfer" and f["te"] == "trailers"
               and f["authorization"] == "Bearer x" for f in fields)
    # answered out of order, each with its own request's value: validation passes only if every
    # answer reaches the call that sent its request
    link.data_received(answer(5, 2) + answer(1, 0) + answer(3, 1))
    assert [(c[0], c[1].sent_index) for c in scheduler.calls] == [("answered", 2), ("answered", 0), ("answered", 1)]
    assert not link.streams and link.next_id == 7


async def test_an_answer_given_to_the_wrong_request_is_a_wrong_answer() -> None:
    """The check above is not vacuous: request 1's value on request 0's stream is refused."""
    link, conns, scheduler, _ = link_of(2)
    for conn in conns:
        conn.send()
    link.data_received(answer(1, 1))
    assert scheduler.calls[0][2] == "wrong_answer" and "entry 0" in scheduler.calls[0][3]


async def test_an_answer_as_long_as_a_good_one_is_still_checked_whole() -> None:
    """After a good answer the link knows its layout (grpc_common.ReplyLayout) and checks the next
    of the same bytes by compare: an answer of the same size with another datatype is parsed and
    refused, one with another value is a wrong answer, and a good one still passes."""
    link, (conn,), scheduler, _ = link_of(1, requests=1)
    for stream, said, datatype in ((1, None, "FP32"), (3, None, "INT8"), (5, 7, "FP32"), (7, None, "FP32")):
        conn.send()
        link.data_received(answer(stream, 0, said=said, datatype=datatype))
    assert [c[0] for c in scheduler.calls] == ["answered", "rejected", "rejected", "answered"]
    assert scheduler.calls[1][2:4] == ("malformed_answer", "output OUTPUT0 is INT8, expected FP32")
    assert scheduler.calls[2][2] == "wrong_answer" and "entry 0" in scheduler.calls[2][3]
    assert len(link.dialer.layouts.by_size) == 1


async def test_a_status_in_the_trailers_is_named_as_grpc_aio_named_it_before() -> None:
    link, (conn,), scheduler, _ = link_of(1, values=False)
    conn.send()
    # Triton's refusal: a status alone (trailers-only), its message percent-encoded
    link.data_received(headers(1, [*OK_HEAD, ("grpc-status", "5"),
                                   ("grpc-message", "Request%20for%20unknown%20model%3A%20%27nope%27")], True))
    conn.send()
    link.data_received(headers(3, OK_HEAD, False) + headers(3, [("grpc-status", "13"), ("grpc-message", "boom")], True))
    conn.send()
    link.data_received(headers(5, [*OK_HEAD, ("grpc-status", "8"), ("grpc-message", "larger than max (9 vs. 8)")], True))
    said = [(c[0], c[2], c[3]) for c in scheduler.calls]
    assert said == [("rejected", "rejected", "gRPC NOT_FOUND: Request for unknown model: 'nope'"),
                    ("rejected", "server_error", "gRPC INTERNAL: boom"),
                    ("rejected", "response_too_large", "gRPC RESOURCE_EXHAUSTED: larger than max (9 vs. 8)")]
    assert conn.link is link and conn.connected  # a refusal keeps the connection


async def test_unavailable_in_the_trailers_loses_the_call_and_keeps_the_others() -> None:
    link, (a, b), scheduler, transport = link_of(2)
    a.send()
    b.send()
    link.data_received(headers(1, [*OK_HEAD, ("grpc-status", "14"), ("grpc-message", "shutting down")], True))
    assert scheduler.calls == [("lost", a, "gRPC UNAVAILABLE: shutting down")]
    assert a.link is None and not a.connected and b.link is link and not transport.aborted
    link.data_received(answer(3, 1))
    assert scheduler.calls[-1][:2] == ("answered", b)


async def test_a_server_that_closes_mid_call_loses_every_call_with_its_words() -> None:
    link, (a, b, idle), scheduler, _ = link_of(3)
    a.send()
    b.send()
    link.data_received(headers(1, OK_HEAD, False) + http2.frame(http2.DATA, 0, 1, b"\0\0\0\0\x10partial"))
    link.connection_lost(None)  # the socket closed with both calls in flight
    lost = [(c[0], c[1]) for c in scheduler.calls]
    assert sorted(lost, key=lambda c: [a, b, idle].index(c[1])) == [("lost", a), ("lost", b), ("lost", idle)]
    assert all(c[2] == "the server closed the HTTP/2 connection" for c in scheduler.calls)
    assert not any(c.connected or c.link for c in (a, b, idle))


async def test_a_reset_stream_and_a_goaway_lose_only_the_calls_they_name() -> None:
    link, (a, b, c), scheduler, transport = link_of(3)
    a.send()
    b.send()
    c.send()
    link.data_received(http2.frame(http2.RST_STREAM, 0, 3, (2).to_bytes(4, "big")))
    assert scheduler.calls == [("lost", b, "the server reset the gRPC stream (HTTP/2 error 2)")]
    # a graceful GOAWAY that took stream 1 but not 5: 5 is lost, 1 may end, then the link closes
    link.data_received(http2.frame(http2.GOAWAY, 0, 0, (1).to_bytes(4, "big") + bytes(4)))
    assert scheduler.calls[1][:2] == ("lost", c) and "GOAWAY" in scheduler.calls[1][2]
    link.data_received(answer(1, 0))
    assert scheduler.calls[2][:3] == ("answered", a, True)  # close: the scheduler opens it elsewhere
    assert transport.aborted


async def test_a_graceful_goaway_sends_idle_calls_elsewhere_at_once() -> None:
    link, (busy, idle), scheduler, transport = link_of(2)
    busy.send()
    link.data_received(http2.frame(http2.GOAWAY, 0, 0, (1).to_bytes(4, "big") + bytes(4)))
    assert scheduler.calls == [("lost", idle, None)]  # no call in flight: reopened at once, on another link
    assert link.room == 0 and not transport.aborted  # the call it took may still end
    link.data_received(answer(1, 0))
    assert scheduler.calls[1][:3] == ("answered", busy, True) and transport.aborted


async def test_calls_past_the_servers_stream_limit_wait_for_a_stream() -> None:
    link, conns, scheduler, transport = link_of(3, settings={http2.MAX_CONCURRENT_STREAMS: 2})
    for conn in conns:
        conn.send()
    assert set(requests_by_stream(transport)) == {1, 3} and len(link.queued) == 1
    link.data_received(answer(1, 0))
    assert set(requests_by_stream(transport)) == {1, 3, 5} and not link.queued  # its turn came
    assert link.room < 0  # attached past the limit: no new call joins this link


async def test_a_timed_out_call_resets_its_stream_and_its_late_answer_is_ignored() -> None:
    link, (a, b), scheduler, transport = link_of(2)
    a.send()
    b.send()
    a.busy = False  # the scheduler's timeout scan
    a.abort()
    await asyncio.sleep(0)
    assert (http2.RST_STREAM, 0, 1, (0x8).to_bytes(4, "big")) in written(transport)
    assert scheduler.calls == [("lost", a, None)] and not transport.aborted
    link.data_received(answer(1, 0) + answer(3, 1))  # stream 1's late answer: nobody's
    assert scheduler.calls[1][:2] == ("answered", b) and len(scheduler.calls) == 2
    b.abort()  # the last call leaves: the connection closes
    assert transport.aborted


async def test_a_request_past_the_servers_window_waits_for_its_window_update() -> None:
    link, (conn,), _, transport = link_of(1, values=False, settings={http2.INITIAL_WINDOW_SIZE: 10})
    before = len(transport.out)
    conn.send()
    data = [f for f in written(transport, before) if f[0] == http2.DATA]
    assert sum(len(f[3]) for f in data) == 10 and not any(f[1] & http2.END_STREAM for f in data)
    link.data_received(http2.window_update(1, 1000))
    data = [f for f in written(transport, before) if f[0] == http2.DATA]
    assert data[-1][1] & http2.END_STREAM and b"".join(f[3] for f in data)[5:] == request(0)


async def test_frames_on_a_stream_never_opened_fail_the_calls_in_flight() -> None:
    link, (a, idle), scheduler, transport = link_of(2)
    a.send()
    link.data_received(http2.frame(http2.DATA, 0, 9, b""))
    assert scheduler.calls[0][:3] == ("failed", a, "bad_response") and "never opened" in scheduler.calls[0][3]
    assert http2.goaway(http2.PROTOCOL_ERROR) in transport.out and transport.aborted


def test_the_grpc_transports_run_without_grpcio() -> None:
    """grpc and grpc_stream need protobuf's messages, not grpcio: with grpc's import refused,
    both load and build a request."""
    import subprocess
    import sys
    from pathlib import Path

    code = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "grpc" or name.startswith(("grpc.", "grpc_")):
            raise ImportError("no grpcio here")
sys.meta_path.insert(0, Refuse())
from engine.triton.transports import grpc, grpc_stream
print(len(grpc.messages().ModelInferRequest(model_name="m").SerializeToString()))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[3])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3"], done.stdout


def test_no_module_of_the_product_imports_grpcio() -> None:
    """engine/ and tui/ never import grpc (grpcio): its asyncio transport is gone, and the core
    install does not carry it (the import contract in pyproject.toml says so too)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    found = []
    for path in [*(root / "engine").rglob("*.py"), *(root / "tui").rglob("*.py")]:
        text = path.read_text()
        if "grpc" not in text:
            continue  # no import of it can be there: the parse (a second for the whole tree) is spared
        for node in ast.walk(ast.parse(text, str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.relative_to(root)}: {n}" for n in names if n == "grpc" or n.startswith(("grpc.", "grpc_"))]
    assert found == []


async def test_at_a_levels_end_calls_in_flight_are_left_to_end_not_cancelled() -> None:
    """A reset races Triton's (before 24.12) cancellation and can kill it: the level's calls
    leave, their streams stay open, the answers are read and dropped, and the link closes once
    the last is in."""
    link, (a, b), scheduler, transport = link_of(2)
    link.dialer.links.append(link)
    a.send()
    b.send()
    link.dialer.level_ends()
    for conn in (a, b):
        conn.busy = False
        conn.abort()
    link.dialer.forget()
    await asyncio.sleep(0)
    assert not any(f[0] == http2.RST_STREAM for f in written(transport)) and not transport.aborted
    assert link.room == 0 and link.abandoned == {1, 3}  # no new call joins it
    settled = asyncio.ensure_future(link.dialer.settle())
    link.data_received(answer(1, 0))
    assert not transport.aborted and not settled.done()
    link.data_received(answer(3, 1))
    await asyncio.wait_for(settled, 5)
    assert transport.aborted and not link.abandoned
    assert [c[0] for c in scheduler.calls] == ["lost", "lost"]  # the answers went to nobody


async def test_an_answer_that_never_comes_after_the_levels_end_is_given_up(monkeypatch) -> None:
    from engine.triton.transports import grpc

    monkeypatch.setattr(grpc, "LINGER_S", 0.01)
    link, (a,), _, transport = link_of(1)
    link.dialer.links.append(link)
    a.send()
    link.dialer.level_ends()
    a.busy = False
    a.abort()
    await asyncio.wait_for(link.dialer.settle(), 5)  # the linger's timer closed the link
    assert transport.aborted and not link.abandoned
    assert not any(f[0] == http2.RST_STREAM for f in written(transport))
