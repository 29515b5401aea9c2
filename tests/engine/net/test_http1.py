"""HTTP/1.1 framing used by the load workers and the control calls (pure), and the blocking control
call against a loopback server."""

from __future__ import annotations

import pytest

from engine.net.http1 import (
    BadResponse,
    ResponseTooLarge,
    dechunk,
    describe_failure,
    encode_request,
    error_message,
    parse_endpoint,
    parse_head,
    request_blocking,
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


# --------------------------------------------------------------------------- blocking control calls


@pytest.fixture()
def plain_server():
    """A loopback HTTP server: 200 with a JSON body on /ok, 503 elsewhere."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            ok = self.path == "/ok"
            body = b'{"accept": "%s"}' % self.headers.get("Accept", "").encode() if ok else b"busy"
            self.send_response(200 if ok else 503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # a short poll: shutdown() waits for the serving loop to look (0.5 s by default)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_blocking_call_gets_the_reply_with_the_callers_headers(plain_server):
    reply = request_blocking(plain_server, "/ok", headers={"Accept": "text/plain"})
    assert reply.status == 200 and reply.json() == {"accept": "text/plain"}
    assert request_blocking(f"{plain_server}/elsewhere").status == 503  # a full URL, no path


async def test_a_blocking_call_from_inside_an_event_loop_runs_on_its_own_loop(plain_server):
    assert request_blocking(plain_server, "/ok").status == 200


def test_a_blocking_call_caps_the_body(plain_server):
    with pytest.raises(ResponseTooLarge):
        request_blocking(plain_server, "/ok", max_bytes=4)


def test_a_refused_connection_is_named_in_a_few_words():
    import socket

    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(OSError) as caught:
            request_blocking(url, "/v2/health/ready", timeout_s=5.0)
    assert describe_failure(caught.value) == "connection refused"
    assert describe_failure(TimeoutError()) == "timed out"
    assert describe_failure(OSError("no  route\nto host")) == "no route to host"
