"""grpc_stream's HTTP/2 client against hostile servers on loopback sockets (a thread each,
written here): SETTINGS outside RFC 9113's bounds fail the request in flight with the server's
setting and value named (what the level counts as its error) and a GOAWAY; a server that floods
PING or SETTINGS, reading nothing of what we answer, is dropped with a reason while this
process's memory stays put."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from engine.net import http2
from engine.net.stamped_socket import StampedSocket
from engine.triton.target import Target, TargetInfo
from engine.triton.transports import grpc_stream
from engine.triton.transports.grpc import GrpcPayload
from engine.triton.transports.grpc_stream import GrpcStreamDialer
from tests.engine.load.conftest import quick_load, sweep
from tests.engine.triton.test_grpc_stream_frames import Scheduler

RSS_BOUND = 50 << 20  # bytes this process may grow by while a peer floods it


def _serve(handler: Callable[[socket.socket], None]) -> tuple[int, threading.Thread]:
    """A one-connection server on loopback: ``handler`` gets the accepted socket."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def run() -> None:
        with listener:
            peer, _ = listener.accept()
            with peer:
                handler(peer)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


async def _request(port: int, timeout_s: float = 10.0, watch: Callable[[], None] | None = None) -> Scheduler:
    """One grpc_stream connection to ``port`` with a request in flight, until it is lost."""
    scheduler = Scheduler()
    payload = GrpcPayload(f"127.0.0.1:{port}", False, (b"\x0a\x07toy_llm",), (), (("TOKEN", "BYTES"),), 1 << 20)
    conn: Any = GrpcStreamDialer(scheduler, payload).connection()  # type: ignore[arg-type]
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setblocking(False)
    StampedSocket(asyncio.get_running_loop(), sock, conn)
    conn.send()
    deadline = time.monotonic() + timeout_s
    while not any(call[0] == "lost" for call in scheduler.calls):
        assert time.monotonic() < deadline, f"the connection was not lost: {scheduler.calls}"
        if watch is not None:
            watch()
        await asyncio.sleep(0.005)
    return scheduler


def _read_until_closed(peer: socket.socket, into: bytearray) -> None:
    peer.settimeout(10)
    try:
        while chunk := peer.recv(65536):
            into += chunk
    except OSError:
        pass


@pytest.mark.parametrize(("key", "value", "said"), [
    (http2.MAX_FRAME_SIZE, 0, "SETTINGS_MAX_FRAME_SIZE of 0, outside 16384..16777215"),
    (http2.MAX_FRAME_SIZE, (1 << 24), "SETTINGS_MAX_FRAME_SIZE of 16777216"),
    (http2.INITIAL_WINDOW_SIZE, 1 << 31, "SETTINGS_INITIAL_WINDOW_SIZE of 2147483648, past 2^31-1 (FLOW_CONTROL_ERROR)"),
    (http2.ENABLE_PUSH, 7, "SETTINGS_ENABLE_PUSH of 7"),
])
def test_settings_out_of_bounds_fail_the_request_naming_the_setting(key: int, value: int, said: str) -> None:
    heard = bytearray()

    def server(peer: socket.socket) -> None:
        peer.sendall(http2.settings_frame({key: value}))
        _read_until_closed(peer, heard)

    port, thread = _serve(server)
    scheduler = asyncio.run(_request(port))
    thread.join(10)
    failed = [call for call in scheduler.calls if call[0] == "failed"]
    assert failed and failed[0][1] == "bad_response" and said in failed[0][2], scheduler.calls
    assert "not HTTP/2 we can follow" in failed[0][2]
    frames = http2.FrameReader(1 << 20).feed(bytes(heard[len(http2.PREFACE):]))
    code = http2.FLOW_CONTROL_ERROR if key == http2.INITIAL_WINDOW_SIZE else http2.PROTOCOL_ERROR
    assert (http2.GOAWAY, 0, 0, bytes(4) + code.to_bytes(4, "big")) in frames  # the connection error, to the server
    assert not any(kind == http2.SETTINGS and flags == http2.ACK for kind, flags, _, _ in frames)  # never acknowledged


async def bad_setting(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An HTTP/2 server (asyncio's, any number of connections) whose SETTINGS carry
    SETTINGS_MAX_FRAME_SIZE = 0, and that reads what it is sent until the client goes."""
    writer.write(http2.settings_frame({http2.MAX_FRAME_SIZE: 0}))
    try:
        while await reader.read(65536):
            pass
    except OSError:
        pass
    writer.close()


async def test_a_level_against_a_server_with_a_bad_setting_fails_with_its_words_not_timeouts() -> None:
    """Real load workers: every request fails at once, naming the setting, as the level's errors."""
    server = await asyncio.start_server(bad_setting, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    info = TargetInfo(model_config={}, inputs=[{"name": "PROMPT", "datatype": "BYTES", "shape": [1]}],
                      outputs=[{"name": "TOKEN", "datatype": "BYTES", "shape": [1]}], max_batch_size=0)
    load = quick_load(concurrency=[1], transport="grpc_stream", on_level_failure="stop", request_timeout_s=3.0)
    try:
        (level,), events = await sweep(Target("http://127.0.0.1:1", "toy", grpc_url=f"127.0.0.1:{port}"), info, load)
    finally:
        server.close()
    assert level.status == "failed" and level.requests == 0
    assert set(level.errors_by_kind) == {"bad_response"}  # no timeout among them
    assert "SETTINGS_MAX_FRAME_SIZE of 0" in level.error_messages[0]
    (error,) = events.of("error")
    assert "SETTINGS_MAX_FRAME_SIZE of 0" in error.message


FLOOD_MOST_S = 120.0


def flood(frame: bytes) -> Callable[[socket.socket], None]:
    """A server that sends ``frame`` as fast as it can, never reading, until our side drops it
    (FLOOD_MOST_S only bounds a test whose client never does: a busy box slows both sides)."""
    def server(peer: socket.socket) -> None:
        peer.sendall(http2.settings_frame({}))
        burst = frame * (65536 // len(frame))
        deadline = time.monotonic() + FLOOD_MOST_S
        try:
            while time.monotonic() < deadline:
                peer.sendall(burst)
        except OSError:  # our side dropped it
            pass
    return server


def _flooded(frame: bytes) -> tuple[Scheduler, int]:
    """The connection's calls and the most this process's RSS grew by while flooded."""
    process = psutil.Process()
    before = process.memory_info().rss
    peak = [before]

    def watch() -> None:
        peak[0] = max(peak[0], process.memory_info().rss)

    port, thread = _serve(flood(frame))
    scheduler = asyncio.run(_request(port, timeout_s=FLOOD_MOST_S, watch=watch))
    watch()
    thread.join(FLOOD_MOST_S)
    return scheduler, peak[0] - before


@pytest.mark.parametrize("frame", [http2.frame(http2.PING, 0, 0, b"12345678"), http2.settings_frame({})],
                         ids=["ping", "settings"])
def test_a_control_frame_flood_is_dropped_with_a_reason(frame: bytes) -> None:
    scheduler, grew = _flooded(frame)
    failed = [call for call in scheduler.calls if call[0] == "failed"]
    assert failed and "a flood of control frames: more than 1000 PING/SETTINGS in a second" in failed[0][2]
    assert grew < RSS_BOUND


def test_a_peer_that_never_reads_our_answers_is_dropped_before_they_fill_our_memory(monkeypatch) -> None:
    # the rate cap off: only the bytes of answers queued for a peer that reads nothing stop it
    monkeypatch.setattr(grpc_stream, "MAX_CONTROL_FRAMES", 1 << 60)
    scheduler, grew = _flooded(http2.frame(http2.PING, 0, 0, b"12345678"))
    failed = [call for call in scheduler.calls if call[0] == "failed"]
    assert failed and "a peer that does not read" in failed[0][2] and "answers queued unread" in failed[0][2]
    assert grew < RSS_BOUND
