"""HTTP/1.1 framing used by the load workers and the control calls (pure)."""

from __future__ import annotations

import pytest

from engine.http1 import (
    BadResponse,
    dechunk,
    encode_request,
    error_message,
    parse_endpoint,
    parse_head,
)

TRITON_OK = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
    b"Inference-Header-Content-Length: 103\r\nContent-Length: 167\r\n\r\n"
)


def test_parse_triton_head():
    head = parse_head(TRITON_OK + b"x" * 10)
    assert head is not None
    assert head.status == 200
    assert head.head_len == len(TRITON_OK)
    assert head.content_length == 167
    assert head.inference_header_length == 103
    assert not head.chunked and not head.close


def test_incomplete_head_waits():
    assert parse_head(TRITON_OK[:40]) is None
    assert parse_head(bytearray(TRITON_OK[:-1])) is None


def test_error_status_and_close():
    head = parse_head(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\ncontent-length: 20\r\n\r\n")
    assert head.status == 400 and head.close and head.content_length == 20


def test_http10_without_keep_alive_closes():
    assert parse_head(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").close


def test_chunked_head_has_no_length():
    head = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert head.chunked and head.content_length is None


@pytest.mark.parametrize(
    "raw",
    [b"SSH-2.0-OpenSSH_9\r\n\r\n", b"HTTP/1.1 abc OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"],
)
def test_garbage_is_a_bad_response(raw):
    with pytest.raises(BadResponse):
        parse_head(raw)


def test_oversized_head_is_a_bad_response():
    with pytest.raises(BadResponse):
        parse_head(b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000)


def test_dechunk():
    body = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\n\r\nNEXT"
    assert dechunk(body) == (b"Wikipedia", len(body) - 4)
    assert dechunk(b"4\r\nWiki\r\n5\r\npe") is None
    assert dechunk(b"4\r\nWiki\r\n0\r\n") is None
    with pytest.raises(BadResponse):
        dechunk(b"zz\r\n")


def test_error_message_takes_tritons_text():
    assert error_message(b'{"error":"Request for unknown model: \'nope\' is not found"}') == (
        "Request for unknown model: 'nope' is not found"
    )
    assert error_message(b"<html>\n  Bad   gateway</html>") == "<html> Bad gateway</html>"
    assert len(error_message(b"x" * 1000)) == 300


def test_parse_endpoint():
    e = parse_endpoint("http://127.0.0.1:8000")
    assert (e.host, e.port, e.tls, e.base_path, e.host_header) == ("127.0.0.1", 8000, False, "", "127.0.0.1:8000")
    e = parse_endpoint("https://triton.example.com/prefix/")
    assert (e.host, e.port, e.tls, e.base_path, e.host_header) == ("triton.example.com", 443, True, "/prefix", "triton.example.com")
    for bad in ("ftp://x", "localhost:8000", "http://:80", "http://h:99999"):
        with pytest.raises(ValueError):
            parse_endpoint(bad)


def test_encode_request():
    e = parse_endpoint("http://h:1/base")
    raw = encode_request("POST", e, "/v2/x", {"A": "b"}, b"body")
    assert raw == b"POST /base/v2/x HTTP/1.1\r\nHost: h:1\r\nA: b\r\nContent-Length: 4\r\n\r\nbody"
    assert encode_request("GET", e, "/v2", {}) == b"GET /base/v2 HTTP/1.1\r\nHost: h:1\r\n\r\n"
