"""The stamped socket on real loopback TCP: bytes read late carry the kernel's time of their
arrival, not the time we read them; writes the kernel cannot take at once are kept and sent in
order; a peer's close and our abort reach the protocol once, a loop pass later."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from typing import Any

import pytest

from engine.net.stamped_socket import HAVE_STAMPS, SO_TIMESTAMPNS, StampedSocket, stamp_of


class Protocol:
    def __init__(self) -> None:
        self.transport: Any = None
        self.reads: list[tuple[bytes, int, int]] = []  # (bytes, kernel stamp, read at)
        self.lost: list[BaseException | None] = []
        self.got_any = asyncio.Event()
        self.gone = asyncio.Event()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reads.append((data, self.transport.arrived_ns, time.monotonic_ns()))
        self.got_any.set()

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost.append(exc)
        self.gone.set()


def pair() -> tuple[socket.socket, socket.socket]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        ours = socket.create_connection(listener.getsockname())
        theirs, _ = listener.accept()
    ours.setblocking(False)
    return ours, theirs


def stamped() -> tuple[StampedSocket, Protocol, socket.socket]:
    """Our side on the running loop, its protocol, and the peer's socket."""
    ours, theirs = pair()
    protocol = Protocol()
    return StampedSocket(asyncio.get_running_loop(), ours, protocol), protocol, theirs


def kernel_stamps_tcp() -> bool:
    """Whether this kernel stamps TCP reads at all, asked of a blocking socket pair of its own."""
    ours, theirs = pair()
    ours.setblocking(True)
    try:
        ours.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        for _ in range(20):
            theirs.sendall(b"x")
            _, ancillary, _, _ = ours.recvmsg(16, socket.CMSG_SPACE(16))
            if ancillary:
                return True
            time.sleep(0.05)
        return False
    finally:
        ours.close()
        theirs.close()


def test_no_stamp_in_the_ancillary_data_is_zero() -> None:
    assert stamp_of([]) == 0
    assert stamp_of([(socket.SOL_SOCKET, SO_TIMESTAMPNS + 1, bytes(16))]) == 0


def test_a_kernel_stamp_reads_on_the_monotonic_clock() -> None:
    now_real, now_mono = time.time_ns(), time.monotonic_ns()
    raw = struct.pack("qq", now_real // 10**9, now_real % 10**9)
    assert abs(stamp_of([(socket.SOL_SOCKET, SO_TIMESTAMPNS, raw)]) - now_mono) < 5_000_000


@pytest.mark.skipif(not HAVE_STAMPS, reason="the kernel's receive stamps are Linux's")
def test_bytes_read_late_carry_when_they_arrived() -> None:
    async def main() -> None:
        transport, protocol, theirs = stamped()
        assert transport.stamped
        # the kernel turns its packet stamps on a moment after the first socket asks (a global
        # switch, flipped from a work queue): until then a read carries none (arrived_ns 0, and
        # the transports fall back to the loop's wake). Try until one is stamped.
        for _ in range(20):
            protocol.got_any.clear()
            theirs.sendall(b"answer")
            sent = time.monotonic_ns()
            time.sleep(0.05)  # the loop is busy: the bytes wait in our socket
            await asyncio.wait_for(protocol.got_any.wait(), 30)
            data, stamp, read_at = protocol.reads[-1]
            assert data == b"answer"
            if stamp:
                break
        if not stamp and not kernel_stamps_tcp():
            pytest.skip("this kernel gives no receive times on TCP (the transports fall back to the loop's wake)")
        assert stamp > 0, "no read carried the kernel's receive time"
        assert read_at - stamp > 25_000_000  # stamped on arrival, well before the read
        assert stamp - sent < 25_000_000
        transport.abort()
        theirs.close()

    asyncio.run(main())


def test_writes_the_kernel_cannot_take_at_once_are_sent_in_order() -> None:
    async def main() -> None:
        transport, protocol, theirs = stamped()
        chunks = [bytes([i]) * 1_000_000 for i in range(8)]  # past both sockets' buffers
        for chunk in chunks:
            transport.write(chunk)
        assert transport.pending  # the peer reads nothing yet: some of it waits
        theirs.setblocking(False)
        received = bytearray()
        while len(received) < 8_000_000:
            try:
                received += theirs.recv(1 << 20)
            except BlockingIOError:
                await asyncio.sleep(0.001)
        assert bytes(received) == b"".join(chunks)
        assert not transport.pending
        transport.abort()
        theirs.close()

    asyncio.run(main())


def test_the_peers_close_and_our_abort_are_heard_once_a_pass_later() -> None:
    async def main() -> None:
        _, protocol, theirs = stamped()
        theirs.close()
        await asyncio.wait_for(protocol.gone.wait(), 30)
        assert protocol.lost == [None]

        transport, protocol, theirs = stamped()
        transport.abort()
        assert protocol.lost == [] and transport.is_closing()  # not inside abort() itself
        transport.abort()
        await asyncio.wait_for(protocol.gone.wait(), 30)
        await asyncio.sleep(0)
        assert protocol.lost == [None]
        transport.write(b"after")  # a closed socket takes no more
        theirs.close()

    asyncio.run(main())
