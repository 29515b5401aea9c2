"""The worker's per-connection framing (Slot), fed the way asyncio's transport feeds a
BufferedProtocol: get_buffer, recv_into the returned view, buffer_updated. Pure: no sockets."""

from __future__ import annotations

import json

import pytest

from engine.load.worker import INITIAL_BUFFER, Slot


class Recording:
    """Stands in for the Worker: records what the slot reports."""

    generation = 0
    selector = None  # no event loop: no unread-time estimate

    raw = b""

    def __init__(self):
        self.done = []
        self.failures = []

    def completed(self, slot, head, buf, end):
        self.done.append((head.status, bytes(buf[head.head_len : end])))
        slot.busy = False

    def failed(self, slot, kind, message):
        self.failures.append((kind, message))

    def unexpected(self, slot, message):
        self.failures.append(("unexpected", message))


def _response(body: bytes, status: int = 200, extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status} OK\r\nContent-Type: application/octet-stream\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def _feed(slot: Slot, data: bytes, chunk: int) -> None:
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
    slot = Slot(w)
    bodies = [b"x" * 10, b"y" * (3 * INITIAL_BUFFER + 5), b"", b"z" * 300]
    for body in bodies:
        slot.busy = True
        _feed(slot, _response(body), chunk)
    assert w.failures == []
    assert w.done == [(200, b) for b in bodies]
    assert len(slot.buf) >= 3 * INITIAL_BUFFER  # grew once for the big body, and kept it


def test_error_status_keeps_its_body():
    w = Recording()
    slot = Slot(w)
    slot.busy = True
    body = json.dumps({"error": "unexpected shape for input 'INPUT0'"}).encode()
    _feed(slot, _response(body, 400), 13)
    assert w.done == [(400, body)]


def test_chunked_response():
    w = Recording()
    slot = Slot(w)
    slot.busy = True
    _feed(slot, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n0\r\n\r\n", 5)
    assert w.done == [(200, b"4\r\nWiki\r\n0\r\n\r\n")]


def test_bytes_beyond_the_response_or_without_a_request_are_bad():
    w = Recording()
    slot = Slot(w)
    slot.busy = True
    _feed(slot, _response(b"ab") + b"HTTP/1.1 200", 1 << 20)
    assert w.failures == [("bad_response", "more bytes than the response holds")]
    w2 = Recording()
    idle = Slot(w2)
    _feed(idle, b"HTTP/1.1 408 Request Timeout\r\n\r\n", 100)
    assert w2.failures and w2.failures[0][0] == "unexpected"


def test_garbage_and_missing_length_are_bad_responses():
    w = Recording()
    slot = Slot(w)
    slot.busy = True
    _feed(slot, b"SSH-2.0-OpenSSH\r\n\r\n", 100)
    assert w.failures[0][0] == "bad_response"
    w = Recording()
    slot = Slot(w)
    slot.busy = True
    _feed(slot, b"HTTP/1.1 200 OK\r\n\r\nbody", 100)
    assert w.failures == [("bad_response", "response without Content-Length")]
