"""grpc's calls on real sockets: four calls multiplexed on one HTTP/2 connection to the embedded
Triton, each answer (the identity model's echo of its own request) reaching the call that sent
it; and a server that closes its connection in the middle of an answer, whose calls are lost
with its words and not left hanging."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from types import SimpleNamespace
from typing import Any

import psutil

from engine.load.dev import LoadDev
from engine.net import http2
from engine.triton.answer_check import AnswerSpec
from engine.triton.answer_values import Expected
from engine.triton.transports.grpc import GrpcCall, GrpcDialer
from engine.triton.transports.grpc_common import GrpcPayload, messages
from tests.engine.load.test_grpc_unary_frames import Scheduler

CALLS = 4


def _scheduler() -> Scheduler:
    scheduler = Scheduler()
    scheduler.plan = SimpleNamespace(timeout_ns=10_000_000_000)  # type: ignore[assignment]
    scheduler.dev = LoadDev()  # type: ignore[attr-defined]
    return scheduler


def _identity_requests(count: int) -> tuple[tuple[bytes, ...], AnswerSpec]:
    """``count`` requests of the identity model, each 16 floats of its own; each answer must echo its own."""
    requests, expected = [], []
    for n in range(count):
        raw = struct.pack("<16f", *(float(100 * n + i) for i in range(16)))
        request = messages().ModelInferRequest(model_name="identity")
        tensor = request.inputs.add(name="INPUT0", datatype="FP32")
        tensor.shape.extend([1, 16])
        request.raw_input_contents.append(raw)
        request.outputs.add().name = "OUTPUT0"
        requests.append(request.SerializeToString())
        expected.append({"OUTPUT0": Expected("FP32", raw)})
    spec = AnswerSpec({}, expected=tuple(expected), labels=tuple(f"entry {n}" for n in range(count)))
    return tuple(requests), spec


async def _until(scheduler: Scheduler, count: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(scheduler.calls) < count:
        assert time.monotonic() < deadline, f"no end to the calls: {scheduler.calls}"
        await asyncio.sleep(0.005)


def _connections_to(port: int) -> int:
    return sum(1 for c in psutil.Process().net_connections("tcp")
               if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED)


async def test_four_calls_in_flight_on_one_connection_to_triton_each_get_their_own_answer(identity_server) -> None:
    scheduler = _scheduler()
    requests, spec = _identity_requests(CALLS)
    address = identity_server.grpc_url.split("://", 1)[-1]
    payload = GrpcPayload(address, False, requests, (), (("OUTPUT0", "FP32"),), 1 << 20, spec)
    dialer = GrpcDialer(scheduler, payload)  # type: ignore[arg-type]
    calls: list[Any] = [dialer.connection() for _ in range(CALLS)]
    assert await dialer.open(calls, 0) is None and all(c.connected for c in calls)
    (link,) = dialer.links
    port = int(address.rsplit(":", 1)[1])
    assert _connections_to(port) == 1
    for round_ in range(3):  # each call sends each request in turn: all four in flight at once, then answered
        for call in calls:
            call.send()
        assert len(link.streams) == CALLS  # nothing is read between the sends: four streams open at once
        await _until(scheduler, CALLS * (round_ + 1))
    kinds = [c[0] if c[0] != "rejected" else c[2:4] for c in scheduler.calls]
    assert kinds == ["answered"] * CALLS * 3, kinds  # a swapped answer would be a wrong_answer
    assert _connections_to(port) == 1 and link.next_id == 2 * CALLS * 3 + 1
    for call in calls:
        call.abort()
    await asyncio.sleep(0)
    assert not dialer.links


def _close_mid_answer(listener: socket.socket, seen: list[bytes]) -> None:
    """A gRPC server that reads the requests, starts an answer to the first and closes."""
    with listener:
        peer, _ = listener.accept()
        with peer:
            peer.sendall(http2.settings_frame({}))
            reader, got = http2.FrameReader(1 << 24), []
            peer.settimeout(10)
            while sum(1 for f in got if f[0] == http2.DATA) < 2:
                data = peer.recv(65536)
                seen.append(data)
                got += reader.feed(data[len(http2.PREFACE):] if data.startswith(http2.PREFACE) else data)
            head = http2.encode_headers([(":status", "200"), ("content-type", "application/grpc")])
            peer.sendall(http2.frame(http2.HEADERS, http2.END_HEADERS, 1, head)
                         + http2.frame(http2.DATA, 0, 1, b"\0\0\0\0\x40partial"))
            peer.shutdown(socket.SHUT_WR)  # closed its side mid-answer (a FIN: read all we sent first)
            while peer.recv(65536):
                pass


async def test_a_server_that_closes_mid_answer_loses_its_calls_in_its_words() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    seen: list[bytes] = []
    server = threading.Thread(target=_close_mid_answer, args=(listener, seen), daemon=True)
    server.start()
    scheduler = _scheduler()
    requests, spec = _identity_requests(2)
    dialer = GrpcDialer(scheduler, GrpcPayload(f"127.0.0.1:{port}", False, requests, (), (("OUTPUT0", "FP32"),),
                                               1 << 20, spec))  # type: ignore[arg-type]
    calls: list[GrpcCall] = [dialer.connection() for _ in range(2)]
    assert await dialer.open(calls, 0) is None  # type: ignore[arg-type]
    for call in calls:
        call.send()
    await _until(scheduler, 2)
    server.join(10)
    assert [(c[0], c[2]) for c in scheduler.calls] == [("lost", "the server closed the HTTP/2 connection")] * 2
    assert {c[1] for c in scheduler.calls} == set(calls)
    assert not dialer.links and not any(c.connected for c in calls)


async def test_calls_past_six_take_another_connection(identity_server) -> None:
    """As perf_analyzer's client shares a channel among at most 6 clients: 8 calls, 2 connections."""
    scheduler = _scheduler()
    requests, spec = _identity_requests(1)
    address = identity_server.grpc_url.split("://", 1)[-1]
    dialer = GrpcDialer(scheduler, GrpcPayload(address, False, requests, (), (("OUTPUT0", "FP32"),), 1 << 20,
                                               spec))  # type: ignore[arg-type]
    calls: list[Any] = [dialer.connection() for _ in range(8)]
    assert await dialer.open(calls, 0) is None
    assert sorted(len(link.calls) for link in dialer.links) == [2, 6]
    assert _connections_to(int(address.rsplit(":", 1)[1])) == 2
    for call in calls:
        call.send()
    await _until(scheduler, 8)
    assert [c[0] for c in scheduler.calls] == ["answered"] * 8
    for call in calls:
        call.abort()
