"""The network named: a sweep through a proxy that delays every byte 300 ms each way records a
round trip of about 0.6 s, says so in the report's setup, and the verdict names the network.
The delay is long beside what a busy machine does to a request and to our load worker (with two
CPU hogs beside the suite its event loop lags up to 90 ms, which the client audit holds against
a quarter of the latency): the path makes up most of the latency, and the client stays within
its audit, whatever else runs on the box.

The proxy is a userspace relay on loopback: the kernel's view of the client's connections (their
connect time, TCP_INFO's RTT) ends at the proxy and stays well under a millisecond, while the
time to the first byte of a health answer crosses the whole delayed path
(engine/triton/path_probe.py). The test checks both, so it shows why the probe is the measure."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import format as fmt
from engine.net.tcp import kernel_rtt_us
from engine.profiles import load_profile
from engine.record.doc import to_markdown
from engine.record.findings import analyze
from engine.record.reader import Recording
from engine.record.recording_report import build_report
from engine.session import Session, SessionOptions
from engine.triton.path_probe import health_rtt
from engine.triton.target import Target

DELAY_S = 0.300  # each way: a server read crosses it twice, well inside the sweep's 2 s wait for one
# (STATS_TIMEOUT_S) on a loaded box too (at 400 ms a CI clone's level lost its server breakdown,
# and with it the network verdict); the path probe gives up past 2 s
QUICK = ["load.max_trials=1", "load.contended_percent=100",  # the box-noise rule off (tests/conftest.py)
         "load.window_ms=300", "load.warmup_s=0.2", "load.max_windows=3", "load.min_window_requests=10",
         "load.stability_percent=90", "load.workers=1"]


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Forward what ``reader`` gives, each chunk DELAY_S after it arrived (a delay line: chunks
    in flight together are delayed together, not one after another)."""
    loop = asyncio.get_running_loop()
    line: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await line.get()
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            if not data:
                writer.close()
                return
            writer.write(data)
            await writer.drain()

    sender = loop.create_task(deliver())
    try:
        while data := await reader.read(65536):
            line.put_nowait((loop.time() + DELAY_S, data))
    except OSError:
        pass
    line.put_nowait((loop.time() + DELAY_S, b""))
    try:
        await sender
    except OSError:
        pass


@pytest.fixture
def delay_proxy(identity_server) -> Iterator[str]:
    """http://127.0.0.1:<port> relaying to the embedded server with DELAY_S each way."""
    upstream = identity_server.http_url.split("//", 1)[1]
    host, port = upstream.rsplit(":", 1)
    loop = asyncio.new_event_loop()
    ready: list[int] = []
    writers: list[asyncio.StreamWriter] = []  # closed at the end: a connection left open to the
    # shared server would make its graceful stop wait out its whole grace

    async def relay(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        writers.append(client_w)
        try:
            server_r, server_w = await asyncio.open_connection(host, int(port))
        except OSError:
            client_w.close()
            return
        writers.append(server_w)
        await asyncio.gather(_pump(client_r, server_w), _pump(server_r, client_w))

    async def start() -> asyncio.Server:
        server = await asyncio.start_server(relay, "127.0.0.1", 0)
        ready.append(server.sockets[0].getsockname()[1])
        return server

    server = loop.run_until_complete(start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{ready[0]}"
    finally:
        async def shut() -> None:
            server.close()
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            for writer in writers:
                writer.close()

        asyncio.run_coroutine_threadsafe(shut(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


async def test_the_probe_times_the_answer_not_the_connect() -> None:
    """A server that answers 30 ms after the request: the probe's round trip is those 30 ms (a
    slow server's health answer would read as path: the probe runs before the level's load)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(0.030)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        rtt = await health_rtt(Target(f"http://127.0.0.1:{port}", "m"))
    assert rtt is not None and 0.029 <= rtt < 0.5, rtt


async def test_a_path_that_does_not_answer_has_no_round_trip() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    started = time.monotonic()
    assert await health_rtt(Target(f"http://127.0.0.1:{port}", "m")) is None  # refused
    assert time.monotonic() - started < 1.0
    assert await health_rtt(Target("not a url", "m")) is None


def test_the_kernel_s_rtt_on_loopback_is_microseconds() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, socket.create_connection(listener.getsockname()) as client:
        peer, _ = listener.accept()
        with peer:
            for _ in range(5):  # a few exchanges: samples beyond the handshake's
                client.sendall(b"x")
                peer.recv(1)
                peer.sendall(b"y")
                client.recv(1)
            rtt = kernel_rtt_us(client)
    if sys.platform.startswith("linux"):
        assert rtt is not None and 0 <= rtt < 10_000, rtt  # struct tcp_info's tcpi_rtt, µs
    else:
        assert rtt is None  # another OS's TCP_INFO is another struct: not read


@pytest.mark.server
@pytest.mark.slow
def test_a_sweep_through_a_delaying_proxy_names_the_network(delay_proxy: str, tmp_path: Path) -> None:
    profile = load_profile("local", ["server.kind=remote", f"server.url={delay_proxy}", "model.name=identity",
                                     "load.concurrency=1,4", *QUICK,
                                     # a few requests a window (one takes 0.6 s), and windows long
                                     # enough that the server's statistics, read through the same
                                     # delay, still stand for their edges (a quarter of a window, 2 s)
                                     "load.min_window_requests=3", "load.window_ms=8000",
                                     # one such window a level: what is checked is the path, not the
                                     # level's settling
                                     "load.stable_windows=1", "load.max_windows=1"])
    session = Session(profile, SessionOptions(record_dir=tmp_path, check=False, gpu_count=0))
    session.start()
    assert session.join(900), "the session did not finish"  # a bound on a hang, not a speed
    assert session.exit_code == 0, session.error
    (path,) = tmp_path.glob("*.sqlite")
    with Recording.open(path) as rec:
        summary = rec.summary()
    levels = summary.levels_of(summary.main_sweep)
    assert [lv.level for lv in levels] == [1.0, 4.0]
    for lv in levels:
        net = lv.result.network
        assert net is not None and net.rtt_method == "health probe"
        assert 2 * DELAY_S * 0.98 <= net.rtt <= 2 * DELAY_S + 1.0, net  # 2 x 300 ms, plus a loaded machine's slack
        # the kernel sees only the hop to the proxy on loopback
        assert net.connections == lv.level and net.connect_p50 is not None and net.connect_p50 < DELAY_S / 2  # the proxy accepts at once: far below its delay, on a busy box too (89 ms beside two hogs)
        assert net.tcp_rtt_p50 is None or net.tcp_rtt_p50 < 0.010
    findings = analyze(summary)
    verdict = findings.verdict
    assert verdict.kind == "network", (verdict.summary, verdict.evidence)
    # the verdict quotes the round trip measured before its decisive level; the setup, the sweep's shortest
    decisive = next(lv.result.network for lv in levels if lv.level == verdict.level)
    assert decisive is not None and decisive.rtt is not None
    assert f"the client is {fmt.ms(decisive.rtt)} ms from the server" in verdict.summary, verdict.summary
    rtt = summary.network_path()
    assert rtt is not None and rtt.rtt is not None and rtt.rtt <= decisive.rtt
    report = to_markdown(build_report(summary, findings))
    assert f"| Network | client {fmt.ms(rtt.rtt)} ms from the server (round trip: time to the first byte" in report
