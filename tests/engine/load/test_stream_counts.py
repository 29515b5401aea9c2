"""What a streaming server reports is bounded, against loopback servers these tests write (an
HTTP/1.1 server of server-sent events, an HTTP/2 gRPC-stream server) and real load workers: a
token count past what one response can carry, a chunk size line that never ends, a chunk size
past the cap, an event of deeply nested JSON. Each fails the level at once as a malformed answer
naming the server's value, never as a timeout nor as load workers that stopped answering; a
worker's own error is reported as itself. A level where most requests failed is failed, and so
is its run; a streaming table keeps its errors column."""

from __future__ import annotations

import asyncio
import socket
import time
from array import array
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection as Pipe
from typing import Any

import pytest

from engine import columns
from engine.load.worker import Worker
from engine.load.worker_messages import Fatal
from engine.net import http2
from engine.net.sse import MAX_SIZE_LINE
from engine.outcome import RunFacts, RunLedger, outcome
from engine.triton.target import Target, TargetInfo
from engine.triton.transports import MAX_RESPONSE_TOKENS, token_count_problem
from engine.triton.transports.generate_stream import GenerateDialer, GeneratePayload
from engine.triton.transports.grpc import messages
from engine.triton.transports.grpc_stream import FINAL, STREAM
from tests.engine.load.conftest import quick_load, sweep
from tests.engine.triton.test_grpc_stream_frames import Scheduler

HUGE = 1 << 62  # two of them sum past 2^63
INFO = TargetInfo(model_config={}, inputs=[{"name": "PROMPT", "datatype": "BYTES", "shape": [1]}],
                  outputs=[{"name": "TOKEN", "datatype": "BYTES", "shape": [1]},
                           {"name": "COUNT", "datatype": "INT64", "shape": [1]}], max_batch_size=0)
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
Answer = Callable[[asyncio.StreamWriter], Awaitable[None]]


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def _events(*events: bytes) -> Answer:
    async def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + b"".join(_chunk(b"data: " + e + b"\n\n") for e in events) + b"0\r\n\r\n")
    return answer


async def sse_server(answer: Answer, otherwise: Callable[[bytes, bytes], bytes] | None = None,
                     port: int = 0) -> asyncio.Server:
    """generate_stream's requests get ``answer``; any other (statistics, probes) a 404, or
    ``otherwise(head, body)``'s whole HTTP answer (a fake Triton's metadata for the real CLI)."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
                               if line.startswith(b"content-length:")), 0)
                body = await reader.readexactly(length)
                if b"/generate_stream " not in head.split(b"\r\n")[0]:
                    if otherwise is not None:
                        writer.write(otherwise(head, body))
                        await writer.drain()
                        continue
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    break
                await answer(writer)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", port)


async def _level(transport: str, target: Target) -> tuple[Any, Any]:
    # a short warm-up and window: the level fails at its first window, whatever its length
    load = quick_load(concurrency=[1], transport=transport, on_level_failure="stop", request_timeout_s=5.0,
                      tokens_from="COUNT", warmup_s=0.05, window_ms=100)
    (level,), events = await sweep(target, INFO, load)
    return level, events


def _failed_at_once(level: Any, events: Any, said: str) -> None:
    """The level failed on malformed answers naming ``said``, and nothing blames the client."""
    assert level.status == "failed"
    assert set(level.errors_by_kind) == {"malformed_answer"}, level.errors_by_kind  # no timeout among them
    assert said in level.error_messages[0], level.error_messages
    assert not [e for e in events.of("error") if "did not answer" in e.message or e.fatal]


async def _generate_level(answer: Answer) -> tuple[Any, Any]:
    server = await sse_server(answer)
    port = server.sockets[0].getsockname()[1]
    try:
        return await _level("generate_stream", Target(f"http://127.0.0.1:{port}", "toy"))
    finally:
        server.close()


def test_token_counts_outside_one_response_name_the_servers_value() -> None:
    assert token_count_problem(3, "COUNT") is None and token_count_problem(MAX_RESPONSE_TOKENS, "COUNT") is None
    assert "without a token count in COUNT" in str(token_count_problem(None, "COUNT"))
    assert "token count of -1 in COUNT" in str(token_count_problem(-1, "COUNT"))
    assert f"token count of {HUGE} in COUNT" in str(token_count_problem(HUGE, "COUNT"))
    assert "digits" in str(token_count_problem(10**400, "COUNT"))  # a JSON integer of any length, shown short


async def test_sse_token_counts_past_2_63_are_malformed_answers_not_silent_workers() -> None:
    event = b'{"TOKEN": "a", "COUNT": %d}' % HUGE
    level, events = await _generate_level(_events(event, event, event))
    _failed_at_once(level, events, f"the server answered a token count of {HUGE} in COUNT")


def endless_size_line(sent: list[int]) -> Answer:
    """An answer whose chunk size line never ends (64 MiB of 'f' at most), counted in ``sent``."""
    async def endless(writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD)
        while sent[0] < 64 << 20:  # the connection closes long before
            writer.write(b"f" * 512)
            sent[0] += 512
            await writer.drain()
            await asyncio.sleep(0)
    return endless


def raw(answer: bytes) -> Answer:
    """An answer of SSE_HEAD and then these bytes as they are."""
    async def reply(writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + answer)
    return reply


NESTED_JSON = _chunk(b"data: " + b"[" * 200_000 + b"\n\n") + b"0\r\n\r\n"  # an event of deeply nested JSON


async def test_a_chunk_size_line_that_never_ends_is_refused_at_its_bound() -> None:
    sent = [0]
    level, events = await _generate_level(endless_size_line(sent))
    _failed_at_once(level, events, f"a chunk size line longer than {MAX_SIZE_LINE} bytes")
    assert sent[0] < 64 << 20


@pytest.mark.parametrize(("answer", "said"), [
    (b"%x\r\n" % (1 << 40), f"the server announced a chunk of {1 << 40} bytes"),
    (b"zz\r\n", "a broken chunk size b'zz'"),
    (NESTED_JSON, "an event whose data is not JSON (RecursionError"),
], ids=["huge-chunk", "broken-size", "nested-json"])
async def test_sse_framing_that_does_not_parse_is_a_malformed_answer(answer: bytes, said: str) -> None:
    level, events = await _generate_level(raw(answer))
    _failed_at_once(level, events, said)


def test_a_size_line_fed_a_byte_at_a_time_is_scanned_once() -> None:
    """The bound holds however the bytes come, and each byte is looked at a bounded number of times."""
    scheduler = Scheduler()
    payload = GeneratePayload("127.0.0.1", 1, False, "127.0.0.1", (b"",), (("TOKEN", "BYTES"),))
    conn: Any = GenerateDialer(scheduler, payload).connection()  # type: ignore[arg-type]
    conn.connection_made(type("T", (), {"write": lambda self, d: None, "abort": lambda self: None})())
    conn.send()
    start = time.process_time()
    conn.data_received(SSE_HEAD[:-1])
    conn.data_received(SSE_HEAD[-1:])  # the blank line split across reads
    for _ in range(MAX_SIZE_LINE + 2):
        conn.data_received(b"f")
        if scheduler.calls:
            break
    assert scheduler.calls and scheduler.calls[0][:2] == ("failed", "malformed_answer"), scheduler.calls
    assert "chunk size line longer than" in scheduler.calls[0][2]
    # a header fed a byte at a time, 60 KiB of it, then the same
    conn, scheduler.calls[:] = GenerateDialer(scheduler, payload).connection(), []  # type: ignore[arg-type]
    conn.connection_made(type("T", (), {"write": lambda self, d: None, "abort": lambda self: None})())
    conn.send()
    conn.data_received(b"HTTP/1.1 200 OK\r\n")
    for _ in range(60 << 10):
        conn.data_received(b"x")
    assert not scheduler.calls
    conn.data_received(b"\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunk(b'data: {"TOKEN": "a"}\n\n') + b"0\r\n\r\n")
    assert scheduler.calls == [("answered", False)]
    assert time.process_time() - start < 5.0  # linear: well under a second; quadratic: minutes


# --------------------------------------------------------------------------- gRPC stream


def _grpc_response(request_id: str, final: bool, count: int) -> bytes:
    reply = messages().ModelStreamInferResponse()
    r = reply.infer_response
    r.id = request_id
    for name, datatype, raw in (("TOKEN", "BYTES", b"\x01\0\0\0a"), ("COUNT", "INT64", count.to_bytes(8, "little"))):
        out = r.outputs.add()
        out.name, out.datatype = name, datatype
        out.shape.append(1)
        r.raw_output_contents.append(raw)
    r.parameters[FINAL].bool_param = final
    body = reply.SerializeToString()
    return http2.frame(http2.DATA, 0, STREAM, b"\0" + len(body).to_bytes(4, "big") + body)


async def huge_counts(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A gRPC-stream server (asyncio's) that answers every request with two responses whose
    COUNT is HUGE (their sum past 2^63)."""
    writer.write(http2.settings_frame({}))
    frames, messages_in = http2.FrameReader(1 << 20), bytearray()
    try:
        await reader.readexactly(len(http2.PREFACE))
        while data := await reader.read(65536):
            for kind, _flags, stream, payload in frames.feed(data):
                if kind != http2.DATA or stream != STREAM:
                    continue
                messages_in += payload
                if payload:  # the client's windows back, so that it may keep sending
                    writer.write(http2.window_update(0, len(payload)) + http2.window_update(STREAM, len(payload)))
                while len(messages_in) >= 5 and len(messages_in) >= 5 + int.from_bytes(messages_in[1:5], "big"):
                    size = int.from_bytes(messages_in[1:5], "big")
                    request = messages().ModelInferRequest.FromString(bytes(messages_in[5 : 5 + size]))
                    del messages_in[: 5 + size]
                    writer.write(_grpc_response(request.id, False, HUGE) + _grpc_response(request.id, True, HUGE))
    except (asyncio.IncompleteReadError, OSError):
        pass
    writer.close()


async def test_grpc_stream_token_counts_past_2_63_are_malformed_answers_not_silent_workers() -> None:
    server = await asyncio.start_server(huge_counts, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        level, events = await _level("grpc_stream", Target("http://127.0.0.1:1", "toy", grpc_url=f"127.0.0.1:{port}"))
    finally:
        server.close()
    _failed_at_once(level, events, f"the server answered a token count of {HUGE} in COUNT")


# --------------------------------------------------------------------------- a worker's own error


async def test_a_workers_own_error_is_reported_as_itself_with_its_first_line() -> None:
    ours, theirs = socket.socketpair()
    session, pipe = Pipe(ours.detach()), Pipe(theirs.detach())
    try:
        Worker(0, pipe)
        loop = asyncio.get_running_loop()
        loop.call_soon(lambda: array("q", [1 << 63]))  # what a sum past 2^63 did in a tick's flush
        await asyncio.sleep(0.05)
        assert session.poll(1.0)
        message = session.recv()
        assert isinstance(message, Fatal)
        assert message.message.startswith("load worker 0: OverflowError: ") and "\n" not in message.message
    finally:
        asyncio.get_running_loop().set_exception_handler(None)
        session.close()
        pipe.close()


# --------------------------------------------------------------------------- levels that mostly failed


def mostly_bad(answered: list[int]) -> Answer:
    """Two answers in three the server's refusal, the third a good one (counted in ``answered``)."""
    good, bad = _events(b'{"TOKEN": "a", "COUNT": 1}'), _events(b'{"error": "the model is out of memory"}')

    async def answer(writer: asyncio.StreamWriter) -> None:
        answered[0] += 1
        await (good if answered[0] % 3 == 0 else bad)(writer)
    return answer


async def test_a_level_where_most_requests_failed_is_failed_and_so_is_the_run() -> None:
    level, events = await _generate_level(mostly_bad([0]))
    assert level.status == "failed" and level.requests > 0  # some passed: still not a measurement
    assert set(level.errors_by_kind) == {"rejected"} and level.errors > level.requests
    (error,) = [e for e in events.of("error") if not e.fatal]
    assert f"level {level.level:g} failed: most requests failed: rejected x" in error.message
    assert "the model is out of memory" in error.message
    ledger = RunLedger()
    for event in events:
        ledger.apply(event)
    end = outcome(RunFacts(level_statuses=ledger.statuses(), planned_levels=1, first_failure=ledger.first_failure()))
    assert (end.status, end.exit_code) == ("failed", 1) and end.error is not None
    assert end.error.startswith(f"1 of 1 levels failed (level {level.level:g}: ") and "out of memory" in end.error


async def test_an_error_answered_whole_is_the_servers_refusal_not_a_malformed_stream() -> None:
    body = b'{"error": "model crashed"}'

    async def whole(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)

    level, _ = await _generate_level(whole)
    assert level.status == "failed" and set(level.errors_by_kind) == {"server_error"}, level.errors_by_kind
    assert "HTTP 500: model crashed" in level.error_messages[0]


def test_streaming_tables_keep_the_errors_column() -> None:
    for shown in (columns.SWEEP_SCREEN, columns.SWEEP_REPORT, columns.select(columns.SWEEP, ("level", "p99"))):
        (errors,) = [c for c in columns.with_stream(shown) if c.key == "errors"]
        assert not errors.optional  # never the first dropped where room is short
        assert columns.cells((errors,), columns.LevelFigures(mode="concurrency", level=1, status="failed",
                                                             errors=7)) == {"errors": "7"}
