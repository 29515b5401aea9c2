"""The group's store on loopback: what the group asks of it (set, get, check, wait with a timeout),
a member that starts before its head, a head that goes away, and peers that send what is not a
request: dropped, never the store's end."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from engine.multihost.store import MAX_FRAME, StoreClient, StoreError, serve


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def head() -> StoreClient:
    client = serve("127.0.0.1", free_port(), 5.0)
    yield client
    client.close()


def test_set_get_check_and_a_wait_that_times_out(head: StoreClient) -> None:
    member = StoreClient(*head.address, 5.0)
    assert not member.check(["a"])
    head.set("a", '{"x": 1}')
    member.set("b", b"\x00\xff")
    assert member.get("a") == b'{"x": 1}' and head.get("b") == b"\x00\xff"
    assert member.check(["a", "b"]) and not member.check(["a", "c"])
    with pytest.raises(TimeoutError, match="store keys a, c not set within 0.2 s"):
        member.wait(["a", "c"], 0.2)


def test_a_wait_returns_when_another_host_sets_the_key(head: StoreClient) -> None:
    member = StoreClient(*head.address, 5.0)
    waiting = threading.Thread(target=member.wait, args=(["late"], 5.0))
    waiting.start()
    head.set("late", "1")  # a wait blocks only its own connection: the head's set goes through
    waiting.join(10)
    assert not waiting.is_alive()
    assert member.get("late") == b"1"


def test_a_member_started_before_its_head_joins_when_the_head_comes() -> None:
    port = free_port()
    joined: dict[str, StoreClient] = {}
    member = threading.Thread(target=lambda: joined.setdefault("client", StoreClient("127.0.0.1", port, 10.0)))
    member.start()
    head = serve("127.0.0.1", port, 5.0)
    member.join(20)
    joined["client"].set("hello/1", "x")
    assert head.get("hello/1") == b"x"
    head.close()


def test_no_head_is_a_store_error_after_the_timeout() -> None:
    with pytest.raises(StoreError, match=r"cannot reach the store at 127\.0\.0\.1:\d+"):
        StoreClient("127.0.0.1", free_port(), 0.3)


def test_a_head_that_goes_away_is_a_store_error_not_a_hang(head: StoreClient) -> None:
    member = StoreClient(*head.address, 5.0)
    head.close()
    with pytest.raises(StoreError):
        member.wait(["never"], 5.0)


@pytest.mark.parametrize("junk", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # another protocol
    struct.pack(">I", MAX_FRAME + 1),  # a frame larger than the store reads
    struct.pack(">I", 3) + b"\xc1\xc1\xc1",  # not msgpack
    struct.pack(">I", 2) + b"\x91\x01",  # msgpack, not a request
])
def test_a_peer_that_sends_no_request_is_dropped_and_the_store_goes_on(head: StoreClient, junk: bytes) -> None:
    with socket.create_connection(head.address, timeout=5) as peer:
        peer.sendall(junk)
        try:  # the store closed this connection and answered nothing (a reset where bytes were left unread)
            assert peer.recv(100) == b""
        except ConnectionResetError:
            pass
    head.set("after", "1")
    assert StoreClient(*head.address, 5.0).get("after") == b"1"
