"""ITL from responses read in bursts: a loopback server writes a request's responses several to
a write (or spaced), a client reads them with the kernel's receive stamps (StampedSocket), slowed
on purpose by a blocking callback. Gaps between responses of one read share its stamp and are not
measured; where most are, ITL is not measured (never 0) and an objective on it is not judged."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import numpy as np

from engine import events as ev
from engine.analysis.answer import decide
from engine.analysis.percentiles import latency_stats
from engine.analysis.stream_slo import goodput, goodput_line, misses, parse_slos
from engine.analysis.summed import merged_stream
from engine.load.windows import Aggregate, StreamSamples, stream_stats
from engine.net.connection import StreamTimes
from engine.net.stamped_socket import StampedSocket, arrival

RESPONSES = 8
REQUESTS = 4


def _serve(server: socket.socket, burst: int, gap_s: float) -> None:
    """For each connection: RESPONSES lines, ``burst`` to a write, ``gap_s`` between writes."""
    for _ in range(REQUESTS):
        conn, _ = server.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for k in range(0, RESPONSES, burst):
                conn.sendall(b"token\n" * min(burst, RESPONSES - k))
                time.sleep(gap_s)
            conn.recv(1)  # until the client closes


class Reader(asyncio.Protocol):
    """One request's responses (a line each), stamped as the streaming transports stamp them."""

    def __init__(self, done: asyncio.Future, slow_s: float) -> None:
        self.done, self.slow_s = done, slow_s
        self.times = StreamTimes()
        self.since = time.monotonic_ns()
        self.tr: StampedSocket | None = None
        self.buffer = b""

    def connection_made(self, transport) -> None:
        self.tr = transport

    def data_received(self, data: bytes) -> None:
        now = arrival(self.tr, None, self.since)
        self.buffer += data
        while b"\n" in self.buffer:
            _, self.buffer = self.buffer.split(b"\n", 1)
            self.times.add(now)
        if self.slow_s:
            time.sleep(self.slow_s)  # a client too busy to read as the responses come
        if self.times.responses >= RESPONSES and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _requests(port: int, slow_s: float) -> list[Reader]:
    loop = asyncio.get_running_loop()
    out = []
    for _ in range(REQUESTS):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setblocking(False)
        done = loop.create_future()
        reader = Reader(done, slow_s)
        stamped = StampedSocket(loop, sock, reader)
        await asyncio.wait_for(done, 10)
        stamped.abort()
        out.append(reader)
    return out


def _stream(burst: int, gap_s: float, slow_s: float) -> ev.StreamStats:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(REQUESTS)
    thread = threading.Thread(target=_serve, args=(server, burst, gap_s), daemon=True)
    thread.start()
    try:
        readers = asyncio.run(_requests(server.getsockname()[1], slow_s))
    finally:
        thread.join(10)
        server.close()
    times = [r.times for r in readers]
    assert all(t.responses == RESPONSES for t in times)
    samples = StreamSamples(
        ttft_ns=np.array([r.times.first_ns - r.since for r in readers], np.int64),
        responses=np.array([t.responses for t in times], np.int64),
        decode_ns=np.array([t.last_ns - t.first_ns for t in times], np.int64),
        itl_ns=np.array([g for t in times for g in t.gaps_ns], np.int64),
        tokens=np.array([t.tokens for t in times], np.int64),
        reads=np.array([t.reads for t in times], np.int64),
    )
    stats = stream_stats(Aggregate(0, 1, 1.0, ok=REQUESTS, stream=samples))
    assert stats is not None
    assert samples.itl_ns.size + stats.itl_unmeasured == REQUESTS * (RESPONSES - 1)  # every gap measured or counted
    return stats


def _level(stream: ev.StreamStats) -> ev.LevelResult:
    latency = ev.LatencyStats(count=REQUESTS, p50=0.05, p99=0.06)
    return ev.LevelResult(mode="concurrency", level=8, index=0, status="stable", batch_size=1, windows=3, merged_windows=3,
                          requests=REQUESTS, errors=0, throughput_rps=10.0, throughput_ips=10.0, latency=latency,
                          stream=stream)


def test_responses_read_in_bursts_by_a_slow_client_have_no_itl() -> None:
    stats = _stream(burst=4, gap_s=0.005, slow_s=0.02)
    assert stats.itl_unmeasured >= REQUESTS * 6  # three gaps in each write of four, at least
    assert stats.itl.count == 0 and stats.itl.p50 is None and stats.itl.p99 is None  # not measured, never 0
    assert stats.itl_note is not None
    assert stats.itl_note.startswith("ITL not measurable: the client read ") and "(client BOUND)" in stats.itl_note
    assert stats.ttft.count == REQUESTS
    # an objective on ITL is not judged there: neither met nor missed, and the line says why
    level = _level(stats)
    slos = parse_slos("itl_p99=50ms")
    assert misses(level, slos) == [] and goodput([level], slos) is None
    line = goodput_line([level], "itl_p99=50ms")
    assert line is not None and "not decided" in line and stats.itl_note in line
    why = decide([level], stream_slos=slos).not_decided
    assert "not decided at concurrency 8" in why and stats.itl_note in why


def test_hosts_merge_an_itl_only_where_most_gaps_were_measured() -> None:
    ok = ev.StreamStats(ttft=latency_stats([1_000_000], histogram=True), itl=latency_stats([2_000_000] * 7, histogram=True), responses_per_request=8,
                        output_tokens_per_s=8.0)
    bursty = ev.StreamStats(ttft=latency_stats([1_000_000], histogram=True), itl=latency_stats([], histogram=True), responses_per_request=8,
                            output_tokens_per_s=8.0, itl_unmeasured=6, itl_note="ITL not measurable: ...")
    merged = merged_stream([ok, bursty])
    assert merged is not None and merged.itl_note is None and merged.itl.count == 7 and merged.itl_unmeasured == 6
    merged = merged_stream([bursty, bursty])
    assert merged is not None and merged.itl_note == bursty.itl_note and merged.itl.count == 0


def test_spaced_responses_still_get_a_measured_itl() -> None:
    stats = _stream(burst=1, gap_s=0.005, slow_s=0.0)
    assert stats.itl_note is None
    assert stats.itl.count > stats.itl_unmeasured  # most gaps measured (a busy box may merge a few)
    assert stats.itl.p50 is not None and stats.itl.p50 >= 0.003  # the server's 5 ms, not 0
    level = _level(stats)
    assert "not decided" not in (goodput_line([level], "itl_p99=500ms") or "")
    assert goodput([level], parse_slos("itl_p99=500ms")) is not None
