"""The load worker's way of opening a level's connections (Worker.open_grouped, over the http
transport's TCP dialer): every connection opens, the first group connects no earlier than the
plan's common instant, the groups connect in tight loops, and a refused connect is reported, not
raised. Against a real loopback TCP listener; the request sent is empty (nothing is answered)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import time
from multiprocessing import Pipe

import pytest

from engine.load import worker as worker_module
from engine.load.ticks import LevelPlan
from engine.load.worker import Worker
from engine.net import tcp
from engine.triton.answer_check import AnswerSpec
from engine.triton.transports import http
from engine.triton.transports.http import HttpConnection, HttpPayload
from tests.engine.load.conftest import use_http


def _plan(open_at_ns: int) -> LevelPlan:
    return LevelPlan(level_index=0, mode="concurrency", tick_ns=100_000_000, timeout_ns=2_000_000_000,
                     slots=0, open_at_ns=open_at_ns)


def _worker(port: int, open_at_ns: int = 0, index: int = 0) -> Worker:
    ours, _theirs = Pipe()
    w = Worker(index, ours)
    w.plan = _plan(open_at_ns)
    use_http(w, f"http://127.0.0.1:{port}")
    return w


async def _close(slots: list[HttpConnection], server: asyncio.Server) -> None:
    for slot in slots:
        if slot.tr is not None:
            slot.tr.close()
    server.close()
    await server.wait_closed()


async def _open(count: int, port: int, lead_ns: int, index: int = 0) -> tuple[Worker, list, int, str | None]:
    w = _worker(port, time.monotonic_ns() + lead_ns, index)
    slots = w.new_connections(count)
    error = await w.open_grouped(slots, wait=False)
    return w, slots, w.plan.open_at_ns, error


@pytest.mark.parametrize("index", [0, 2])
def test_every_slot_is_connected_in_groups_and_none_before_the_workers_instant(monkeypatch, index):
    monkeypatch.setattr(worker_module, "OPEN_GROUP", 4)
    monkeypatch.setattr(worker_module, "OPEN_STAGGER_NS", 30_000_000)
    accepted: list[int] = []

    async def main():
        def on_connect(reader, writer):
            accepted.append(time.monotonic_ns())

        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        w, slots, open_at, error = await _open(10, port, 60_000_000, index)
        await asyncio.sleep(0.05)  # the listener's accept callbacks
        peers = {s.tr.get_extra_info("sockname")[1] for s in slots if s.tr is not None}
        await _close(slots, server)
        return open_at, error, peers

    open_at, error, peers = asyncio.run(main())
    assert error is None
    assert len(peers) == 10  # ten distinct connections, one per slot
    assert len(accepted) == 10
    # worker w's first group waits for the level's common instant plus w staggers
    assert min(accepted) >= open_at + index * 30_000_000


def test_a_refused_connect_is_reported_and_leaves_the_slot_unconnected():
    with socket.socket() as probe:  # a port nobody listens on: bound, closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def main():
        return await _open(3, port, 0)

    _, slots, _, error = asyncio.run(main())
    assert all(s.tr is None for s in slots)
    assert error is not None and "refused" in error.lower(), error


def test_slots_refused_at_the_first_address_connect_to_the_next(monkeypatch):
    """A name such as localhost can resolve to ::1 first while the server listens on IPv4 only:
    the slots refused at the first address take the next one, as asyncio's own connect does."""
    monkeypatch.setattr(worker_module, "OPEN_GROUP", 2)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]

    async def main():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        live = server.sockets[0].getsockname()[1]
        w = _worker(live)
        infos = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)) for port in (dead, live)]

        async def resolve():
            return list(infos)

        w.dialer.resolve = resolve  # the resolver's answer, in the order that needs the fallback
        slots = w.new_connections(5)
        error = await w.open_grouped(slots, wait=False)
        ports = [s.tr.get_extra_info("peername")[1] for s in slots if s.tr is not None]
        await _close(slots, server)
        return error, ports, live

    error, ports, live = asyncio.run(main())
    assert error is None
    assert ports == [live] * 5


def test_a_name_that_does_not_resolve_is_reported_not_raised():
    async def main():
        w = _worker(1)

        async def resolve():
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

        w.dialer.resolve = resolve
        slots = w.new_connections(3)
        return slots, await w.open_grouped(slots, wait=False)

    slots, error = asyncio.run(main())
    assert all(s.tr is None for s in slots)
    assert error is not None and "not known" in error, error


@pytest.mark.slow
def test_tls_connections_are_opened_the_same_way(monkeypatch, tmp_path):
    """https endpoints: the tightly connected sockets get their TLS handshake from asyncio, with
    the plan's server name checked against a real certificate."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl binary to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context()
    client_ctx.load_verify_locations(cert)
    monkeypatch.setattr(tcp, "_SSL", {(): client_ctx})  # trusts this test's certificate
    monkeypatch.setattr(worker_module, "OPEN_GROUP", 2)

    async def main():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        w = _worker(port)
        w.take_transport(http.TRANSPORT.dialer(w, HttpPayload("127.0.0.1", port, True, "localhost", (b"",), AnswerSpec({}))))
        slots = w.new_connections(3)
        error = await w.open_grouped(slots, wait=False)
        secured = [s.tr.get_extra_info("ssl_object") is not None for s in slots if s.tr is not None]
        await _close(slots, server)
        return error, secured

    error, secured = asyncio.run(main())
    assert error is None
    assert secured == [True, True, True]
