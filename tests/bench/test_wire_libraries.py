"""bench wire_libraries: the captured payloads parse to the same result through ours and through
h11 / h2 / hpack (skipped where those, not project dependencies, are not importable). No timing."""

from __future__ import annotations

import pytest

from bench import wire_libraries as wl


@pytest.fixture(scope="module")
def payloads() -> wl.Payloads:
    return wl.load_payloads()


def test_the_payloads_are_triton_answers(payloads: wl.Payloads) -> None:
    assert payloads.http1.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Inference-Header-Content-Length:" in payloads.http1
    assert len(payloads.responses) == 3
    for response in payloads.responses:  # HEADERS + DATA + trailers HEADERS, one call each
        assert [kind for kind, _, _ in response] == [wl.http2.HEADERS, wl.http2.DATA, wl.http2.HEADERS]


def test_http1_same_status_headers_and_body_length(payloads: wl.Payloads) -> None:
    pytest.importorskip("h11")
    ours, theirs = wl.Http1Ours(payloads.http1), wl.Http1H11(payloads.http1)
    for _ in range(2):  # a second answer on the same connection
        theirs.before()
        status, length, ihl, body = ours.parse()
        assert (status, length, ihl, body) == theirs.parse()
        assert status == 200 and body == length > ihl > 0


@pytest.mark.parametrize("lean", [False, True], ids=["h2", "h2_lean"])
def test_http2_same_headers_body_and_trailers(payloads: wl.Payloads, lean: bool) -> None:
    pytest.importorskip("h2")
    messages = [wl.frame_bytes(payloads.responses[1], 3 + 2 * i) for i in range(3)]
    ours, theirs = wl.Http2Ours(payloads, messages), wl.Http2H2(payloads, messages, lean=lean)
    for _ in messages:
        theirs.before()
        headers, body, trailers = ours.parse()
        h2_headers, h2_body, h2_trailers = theirs.parse()
        assert {k.encode(): v.encode() for k, v in headers.items()} == h2_headers
        assert {k.encode(): v.encode() for k, v in trailers.items()} == h2_trailers
        assert body == h2_body and len(body) == 2102
        assert headers[":status"] == "200" and trailers == {"grpc-status": "0"}


def test_http2_frame_layers_give_the_same_frames(payloads: wl.Payloads) -> None:
    pytest.importorskip("h2")
    messages = [wl.frame_bytes(payloads.responses[1], 3 + 2 * i) for i in range(2)]
    ours, theirs = wl.FramesOurs(messages), wl.FramesH2(messages)
    for _ in messages:
        assert ours.parse() == theirs.parse()


@pytest.mark.parametrize("case", ["repeated", "first", "huffman"])
def test_hpack_same_header_lists(payloads: wl.Payloads, case: str) -> None:
    hpack = pytest.importorskip("hpack")
    first = wl.header_blocks(payloads.responses[0])
    blocks = {"repeated": wl.header_blocks(payloads.responses[1]), "first": first,
              "huffman": wl.huffman_blocks(payloads)}[case]
    warm = first if case == "repeated" else []
    ours = wl.HpackSide(wl.http2.HpackDecoder, blocks, warm, case != "repeated")
    theirs = wl.HpackSide(hpack.Decoder, blocks, warm, case != "repeated")
    got = ours.parse()
    assert got == theirs.parse() == ours.parse()  # a warm decoder gives the same again
    assert got[0][0] == (":status", "200") and got[1] == [("grpc-status", "0")]
    if case == "huffman":  # the same fields in fewer bytes: the strings are Huffman-coded
        assert sum(map(len, blocks)) < sum(map(len, first))
