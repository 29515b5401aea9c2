"""Opening a group of TCP connections together, for transports that own their sockets (HTTP/1.1, and HTTP/2 for gRPC streams).

Why together: a server that hands each new connection to its first idle thread (Triton's HTTP
front end) spreads connections that arrive in one batch, and piles those that arrive one await
apart onto one thread (docs/results/load_engine_design_notes.md). So each group's sockets connect
in one loop of non-blocking connects, then asyncio takes them over.

Each connection's connect time (connect() to writable, as the group's loop sees it) and, on Linux,
the kernel's RTT estimate (TCP_INFO) are kept for the level (``path_figures``). Both measure only
to the next TCP endpoint: through a proxy they say nothing of the path beyond it.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import struct
import sys
import time
from typing import Any

from engine.net.connection import Connection, Dialer, Scheduler
from engine.net.stamped_socket import StampedSocket

monotonic_ns = time.monotonic_ns

_SSL: dict[tuple[str, ...], Any] = {}


def _ssl_context(alpn: tuple[str, ...] = ()) -> Any:
    """One default TLS context per ALPN list (HTTP/2 needs "h2" offered)."""
    if alpn not in _SSL:
        import ssl

        context = ssl.create_default_context()
        if alpn:
            context.set_alpn_protocols(list(alpn))
        _SSL[alpn] = context
    return _SSL[alpn]


# struct tcp_info (linux/tcp.h): 8 one-byte fields, then u32s: rto, ato, snd_mss, rcv_mss,
# unacked, sacked, lost, retrans, fackets, 4 timestamps, pmtu, rcv_ssthresh, rtt (µs) at 68
_TCP_INFO_LEN = 104
_TCPI_RTT_OFFSET = 68
_HAS_TCP_INFO = sys.platform.startswith("linux") and hasattr(socket, "TCP_INFO")


def kernel_rtt_us(sock: socket.socket) -> int | None:
    """The kernel's smoothed RTT of a connected socket, µs; None where the OS does not give it
    in Linux's layout (macOS's TCP_INFO is another struct) or the call fails."""
    if not _HAS_TCP_INFO:
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
    except OSError:
        return None
    if len(raw) < _TCPI_RTT_OFFSET + 4:
        return None
    return int(struct.unpack_from("I", raw, _TCPI_RTT_OFFSET)[0])


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class TcpDialer(Dialer):
    """Connections to one host and port, optionally TLS; a subclass says what a connection is
    (``connection``: an asyncio protocol that is also a Connection)."""

    alpn: tuple[str, ...] = ()  # protocols offered in TLS's handshake
    stamped = False  # read through StampedSocket (the kernel's receive times) where TLS is off

    def __init__(self, scheduler: Scheduler, host: str, port: int, tls: bool = False, server_hostname: str = "") -> None:
        self.w = scheduler
        self.host, self.port = host, port
        self.tls, self.server_hostname = tls, server_hostname or host
        self.infos: list[Any] = []  # the server's addresses, resolved once per level
        self.unresolved: OSError | None = None  # why they could not be, this level
        self.connect_ns: list[int] = []  # this level's connections: connect times
        self.rtt_us: list[int] = []  # and the kernel's RTT estimates, where it gives them

    def forget(self) -> None:
        self.infos = []
        self.unresolved = None
        self.connect_ns, self.rtt_us = [], []

    def path_figures(self) -> tuple[list[int], list[int]]:
        return list(self.connect_ns), list(self.rtt_us)

    async def resolve(self) -> list[Any]:
        """The server's addresses, in getaddrinfo's order (e.g. ::1 before 127.0.0.1)."""
        return list(await self.w.loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM))

    async def open(self, conns: list[Connection], at_ns: int) -> BaseException | None:
        if self.unresolved is not None:
            return self.unresolved
        if not self.infos:
            try:
                self.infos = await self.resolve()
            except OSError as exc:  # an unknown host: every connection stays closed, the level says why
                self.unresolved = exc
                return exc
        return await self.connect_tight(conns, self.infos, at_ns)

    async def connect_tight(self, conns: list[Connection], infos: list[Any], at_ns: int) -> BaseException | None:
        """Connect to the first address of ``infos`` in one tight loop (at ``at_ns`` when
        given); those that fail try the next address, as asyncio's own connect does (a name
        such as localhost may resolve to ::1 first while the server listens on IPv4 only). An
        address that served after the first failed moves to the front for the next groups.
        Returns the first failure when some connection stayed closed."""
        pending, error = conns, None
        for n, info in enumerate(list(infos)):
            pending, error = await self.connect_once(pending, info, at_ns if n == 0 else 0)
            if n and len(pending) < len(conns):
                infos.remove(info)
                infos.insert(0, info)
            if not pending:
                return None
        return error

    async def connect_once(self, conns: list[Connection], info: Any, at_ns: int) -> tuple[list[Connection], BaseException | None]:
        """One socket per connection, connected in one loop of non-blocking connects, then
        handed to asyncio; returns the connections that failed and the first failure."""
        plan = self.w.plan
        assert plan is not None
        loop = self.w.loop
        family, _, proto, _, address = info
        socks = []
        for _ in conns:
            sock = socket.socket(family, socket.SOCK_STREAM, proto)
            sock.setblocking(False)
            socks.append(sock)
        if at_ns:
            ahead = (at_ns - monotonic_ns()) / 1e9 - 0.002
            if ahead > 0:
                await asyncio.sleep(ahead)
            while monotonic_ns() < at_ns:
                pass
        started = monotonic_ns()
        codes = [sock.connect_ex(address) for sock in socks]
        tls: dict[str, Any] = {"ssl": _ssl_context(self.alpn), "server_hostname": self.server_hostname} if self.tls else {}
        first_error: BaseException | None = None
        failed: list[Connection] = []
        for conn, sock, code in zip(conns, socks, codes, strict=True):
            try:
                if code not in (0, errno.EINPROGRESS):
                    raise OSError(code, os.strerror(code))
                if code:
                    done: asyncio.Future[None] = loop.create_future()
                    loop.add_writer(sock.fileno(), _set_done, done)
                    try:
                        await asyncio.wait_for(done, plan.timeout_ns / 1e9)
                    finally:
                        loop.remove_writer(sock.fileno())
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if code:
                        raise OSError(code, os.strerror(code))
                self.connect_ns.append(monotonic_ns() - started)
                if (rtt := kernel_rtt_us(sock)) is not None:
                    self.rtt_us.append(rtt)
                if self.stamped and not self.tls:
                    StampedSocket(loop, sock, conn)
                else:
                    # the factory runs within this await, so it sees this iteration's connection
                    await loop.create_connection(lambda: conn, sock=sock, **tls)  # type: ignore[type-var]  # noqa: B023
            except (TimeoutError, OSError) as exc:
                sock.close()
                failed.append(conn)
                first_error = first_error or exc
        return failed, first_error
