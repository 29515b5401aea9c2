"""The http transport's per-connection framing (HttpConnection), fed the way asyncio's transport
feeds a BufferedProtocol: get_buffer, recv_into the returned view, buffer_updated. Pure: no sockets."""

from __future__ import annotations

import json

import pytest

from engine.triton.transports.http import INITIAL_BUFFER, HttpConnection


class Recording:
    """Stands in for the scheduler: records what the connection reports."""

    generation = 0
    selector = None  # no event loop: no unread-time estimate

    def __init__(self):
        self.done = []
        self.failures = []

    def answered(self, conn, close):
        self.done.append((200, bytes(conn.view[: conn.end]).split(b"\r\n\r\n", 1)[1]))
        conn.busy = False

    def rejected(self, conn, kind, message, close):
        self.done.append((kind, message))
        conn.busy = False

    def failed(self, conn, kind, message):
        self.failures.append((kind, message))

    def unexpected(self, conn, message):
        self.failures.append(("unexpected", message))


def _response(body: bytes, status: int = 200, extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status} OK\r\nContent-Type: application/octet-stream\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def _feed(slot: HttpConnection, data: bytes, chunk: int) -> None:
    """What asyncio does: each read lands in the view get_buffer returned (the view stays alive
    while buffer_updated runs, as in asyncio's own frame)."""
    pos = 0
    while pos < len(data):
        view = slot.get_buffer(-1)
        n = min(chunk, len(view), len(data) - pos)
        view[:n] = data[pos : pos + n]
        slot.buffer_updated(n)
        pos += n


@pytest.mark.parametrize("chunk", [1, 7, 100, 4096, 1 << 20])
def test_responses_split_anyhow_are_framed_whole(chunk):
    w = Recording()
    slot = HttpConnection(w)
    bodies = [b"x" * 10, b"y" * (3 * INITIAL_BUFFER + 5), b"", b"z" * 300]
    for body in bodies:
        slot.busy = True
        _feed(slot, _response(body), chunk)
    assert w.failures == []
    assert w.done == [(200, b) for b in bodies]
    assert len(slot.buf) >= 3 * INITIAL_BUFFER  # grew once for the big body, and kept it


def test_error_statuses_are_named_by_what_happened_and_keep_the_status_and_message():
    w = Recording()
    slot = HttpConnection(w)
    body = json.dumps({"error": "unexpected shape for input 'INPUT0'"}).encode()
    for status in (400, 503, 302):
        slot.busy = True
        _feed(slot, _response(body, status), 13)
    assert w.done == [
        ("rejected", "HTTP 400: unexpected shape for input 'INPUT0'"),
        ("server_error", "HTTP 503: unexpected shape for input 'INPUT0'"),
        ("bad_response", "HTTP 302: unexpected shape for input 'INPUT0'"),
    ]


def test_chunked_response():
    w = Recording()
    slot = HttpConnection(w)
    slot.busy = True
    _feed(slot, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n0\r\n\r\n", 5)
    assert w.done == [(200, b"4\r\nWiki\r\n0\r\n\r\n")]


def test_bytes_beyond_the_response_or_without_a_request_are_bad():
    w = Recording()
    slot = HttpConnection(w)
    slot.busy = True
    _feed(slot, _response(b"ab") + b"HTTP/1.1 200", 1 << 20)
    assert w.failures == [("bad_response", "more bytes than the response holds")]
    w2 = Recording()
    idle = HttpConnection(w2)
    _feed(idle, b"HTTP/1.1 408 Request Timeout\r\n\r\n", 100)
    assert w2.failures and w2.failures[0][0] == "unexpected"


def test_garbage_and_missing_length_are_bad_responses():
    w = Recording()
    slot = HttpConnection(w)
    slot.busy = True
    _feed(slot, b"SSH-2.0-OpenSSH\r\n\r\n", 100)
    assert w.failures[0][0] == "bad_response"
    w = Recording()
    slot = HttpConnection(w)
    slot.busy = True
    _feed(slot, b"HTTP/1.1 200 OK\r\n\r\nbody", 100)
    assert w.failures == [("bad_response", "response without Content-Length")]
