"""A connected TCP socket read with the kernel's receive time of each read, for transports whose figures are response times (the streams' TTFT and ITL), and the one rule of when a response arrived (``arrival``).

Why: a load worker's loop reads a burst of responses one after another (at 32 streams, a decode
step's 32 responses at once); a response read at the end of the burst was in our socket since
its start, and stamping it when it is read adds our own Python work to the server's time
(docs/results/toy_llm_streaming.md). Linux stamps each packet as it arrives (SO_TIMESTAMPNS) and
``recvmsg`` hands the stamp of the last packet read over with the bytes. Where the option is
not there (not Linux, TLS), ``arrived_ns`` stays 0 and the transport stamps as it reads; so it
does for the first reads after the kernel is asked (it turns stamping on a moment later, from a
work queue: a level's warm-up, not its measured span).

It plays the part of an asyncio transport for its protocol: ``write`` and ``abort``, and
``connection_made`` / ``data_received`` / ``connection_lost`` called back on the loop.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from collections import deque
from typing import Any

READ_BYTES = 65536
SO_TIMESTAMPNS = 35  # Linux's SO_TIMESTAMPNS(_OLD) on x86-64 and arm64 (asm-generic); SCM type alike
HAVE_STAMPS = sys.platform.startswith("linux")
ANCILLARY = socket.CMSG_SPACE(16) if HAVE_STAMPS else 0


def enable_stamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp what ``sock`` receives; False where it will not."""
    if not HAVE_STAMPS:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def stamp_of(ancillary: list[tuple[int, int, bytes]]) -> int:
    """The kernel's receive time in ``recvmsg``'s ancillary data, on the monotonic clock (it
    gives CLOCK_REALTIME: the offset between the two is read now); 0 when there is none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            seconds, nanos = struct.unpack_from("qq", data)
            return seconds * 1_000_000_000 + nanos - (time.time_ns() - time.monotonic_ns())
    return 0


def arrival(transport: Any, selector: Any, since_ns: int) -> int:
    """When the bytes read now reached this process: the kernel's receive time where the socket
    gives it, else when the loop's select returned in this pass (the worker's selector keeps it
    as ``returned``), as perf_analyzer's reader thread stamps each response when it wakes.
    Reading the clock here would add our own Python work since (a burst of 32 responses at 32
    streams). Never before ``since_ns`` (the write) nor after now."""
    now = time.monotonic_ns()
    seen = getattr(transport, "arrived_ns", 0) or getattr(selector, "returned", 0) or now
    return min(now, max(seen, since_ns))


class StampedSocket:
    """One connected, non-blocking socket on the loop, read with recvmsg."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: Any) -> None:
        self.loop = loop
        self.sock = sock
        self.fd = sock.fileno()
        self.protocol = protocol
        self.stamped = enable_stamps(sock)
        self.arrived_ns = 0  # the kernel's receive time of the bytes being handed over (0: unknown)
        self.pending: deque[memoryview] = deque()  # bytes the kernel has not taken yet
        self.pending_bytes = 0  # their total (asyncio's get_write_buffer_size)
        self.closed = False
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        protocol.connection_made(self)
        if not self.closed:
            loop.add_reader(self.fd, self._readable)

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(READ_BYTES, ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        if not data:
            self._lost(None)  # the server closed it
            return
        self.arrived_ns = stamp_of(ancillary) if self.stamped else 0
        self.protocol.data_received(data)

    def write(self, data: bytes) -> None:
        if self.closed or not data:
            return
        if not self.pending:
            try:
                sent = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._lost(exc)
                return
            if sent == len(data):
                return
            self.loop.add_writer(self.fd, self._writable)
            data = data[sent:]
        self.pending.append(memoryview(data))
        self.pending_bytes += len(data)

    def _writable(self) -> None:
        while self.pending:
            chunk = self.pending[0]
            try:
                sent = self.sock.send(chunk)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._lost(exc)
                return
            self.pending_bytes -= sent
            if sent < len(chunk):
                self.pending[0] = chunk[sent:]
                return
            self.pending.popleft()
        self.loop.remove_writer(self.fd)

    def _shut(self) -> bool:
        if self.closed:
            return False
        self.closed = True
        self.loop.remove_reader(self.fd)
        if self.pending:
            self.loop.remove_writer(self.fd)
            self.pending.clear()
            self.pending_bytes = 0
        self.sock.close()
        return True

    def _lost(self, exc: BaseException | None) -> None:
        # a loop pass later, as asyncio's transports do: this may run inside the protocol's
        # own write (a send the scheduler expects to return first)
        if self._shut():
            self.loop.call_soon(self.protocol.connection_lost, exc)

    def abort(self) -> None:
        """Close now; the protocol hears of it a loop pass later."""
        self._lost(None)

    def get_write_buffer_size(self) -> int:
        return self.pending_bytes

    def is_closing(self) -> bool:
        return self.closed
