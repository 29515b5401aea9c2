"""The pure HTTP/2 and HPACK pieces of our gRPC stream client (engine/net/http2.py): frames split and
read back whole however the bytes arrive, and header blocks decoded as RFC 7541's examples say,
Huffman strings and the dynamic table included."""

from __future__ import annotations

import contextlib
import time

import pytest

from engine.net import http2


def test_frames_read_back_whole_from_any_split() -> None:
    sent = [(http2.SETTINGS, 0, 0, b""), (http2.DATA, 0, 1, b"x" * 300), (http2.PING, http2.ACK, 0, b"12345678"),
            (http2.HEADERS, http2.END_HEADERS | http2.END_STREAM, 1, b"\x88")]
    wire = b"".join(http2.frame(*f) for f in sent)
    for step in (1, 7, 9, 100, len(wire)):
        reader = http2.FrameReader()
        got = []
        for at in range(0, len(wire), step):
            got += reader.feed(wire[at : at + step])
        assert got == sent and not reader.buf


def test_a_frame_past_the_size_we_allow_is_refused() -> None:
    with pytest.raises(http2.ProtocolError, match="past the 16384"):
        http2.FrameReader().feed(http2.frame(http2.DATA, 0, 1, b"\0" * 16385))


def test_an_http1_answer_is_named_as_such() -> None:
    with pytest.raises(http2.ProtocolError, match="HTTP/1.x answer .*gRPC port"):
        http2.FrameReader().feed(b"HTTP/1.1 400 Bad Request\r\n\r\n")


def test_data_frames_split_at_the_peers_frame_size() -> None:
    wire = http2.data_frames(3, b"a" * 40000, 16384)
    frames = http2.FrameReader().feed(wire)
    assert [len(f[3]) for f in frames] == [16384, 16384, 7232]
    assert all(kind == http2.DATA and stream == 3 and flags == 0 for kind, flags, stream, _ in frames)


def test_settings_and_padding() -> None:
    values = {http2.INITIAL_WINDOW_SIZE: 1 << 30, http2.ENABLE_PUSH: 0}
    ((_, _, _, payload),) = http2.FrameReader().feed(http2.settings_frame(values))
    assert http2.parse_settings(payload) == values
    assert http2.unpadded(http2.PADDED, b"\x02abc\0\0") == b"abc"
    with pytest.raises(http2.ProtocolError):
        http2.unpadded(http2.PADDED, b"\x09abc")


def test_hpack_integers_with_a_prefix() -> None:
    # RFC 7541 C.1: 10 and 1337 in a 5-bit prefix
    assert http2.encode_int(10, 5) == b"\x0a"
    assert http2.encode_int(1337, 5) == bytes((31, 154, 10))
    decoder = http2.HpackDecoder()
    assert decoder._int(bytes((31, 154, 10)), 0, 5) == (1337, 3)


def test_our_header_block_reads_back() -> None:
    headers = [(":method", "POST"), (":path", "/inference.GRPCInferenceService/ModelStreamInfer"), ("te", "trailers")]
    assert http2.HpackDecoder().decode(http2.encode_headers(headers)) == headers


def test_rfc7541_request_with_huffman_strings() -> None:
    # C.4.1
    block = bytes.fromhex("828684418cf1e3c2e5f23a6ba0ab90f4ff")
    assert http2.HpackDecoder().decode(block) == [(":method", "GET"), (":scheme", "http"), (":path", "/"),
                                                  (":authority", "www.example.com")]


def test_rfc7541_responses_share_and_evict_the_dynamic_table() -> None:
    # C.6.1 then C.6.2, with a 256-byte table: the second response's 307 evicts the first's 302
    decoder = http2.HpackDecoder(256)
    first = decoder.decode(bytes.fromhex(
        "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3"))
    assert first == [(":status", "302"), ("cache-control", "private"), ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                     ("location", "https://www.example.com")]
    assert decoder.size == 222
    second = decoder.decode(bytes.fromhex("4883640effc1c0bf"))
    assert second == [(":status", "307"), *first[1:]]
    assert decoder.size == 222 and decoder.table[0] == (":status", "307") and (":status", "302") not in decoder.table


def test_a_broken_header_block_is_refused() -> None:
    with pytest.raises(http2.ProtocolError, match="index"):
        http2.HpackDecoder().decode(b"\xff\x80\x01")  # an index past both tables
    with pytest.raises(http2.ProtocolError, match="padded"):
        http2.huffman_decode(b"\x00")  # '0' (00000) then three 0 bits: not EOS's prefix
    with pytest.raises(http2.ProtocolError, match="table size"):
        http2.HpackDecoder(4096).decode(http2.encode_int(8192, 5, 0x20))


def _huffman_encode(data: bytes) -> bytes:
    codes = {symbol: (length, code) for (length, code), symbol in http2.huffman_codes().items()}
    bits = "".join(format(codes[b][1], f"0{codes[b][0]}b") for b in data)
    bits += "1" * (-len(bits) % 8)  # EOS's first bits
    return int(bits, 2).to_bytes(len(bits) // 8, "big") if bits else b""


def test_huffman_strings_read_back_whatever_their_bytes() -> None:
    text = bytes(range(256)) * 4 + b"www.example.com"
    assert http2.huffman_decode(_huffman_encode(text)) == text
    assert http2.huffman_decode(b"") == b""
    with pytest.raises(http2.ProtocolError, match="EOS"):
        http2.huffman_decode(b"\xff\xff\xff\xff")  # EOS's 30 ones inside the string


def test_a_mebibyte_of_huffman_costs_little_cpu() -> None:
    blob = _huffman_encode(b"grpc-message: " + bytes(range(32, 127)) * 12000)[: 1 << 20]
    http2.huffman_decode(b"")  # the table, built once per process
    start = time.process_time()
    with contextlib.suppress(http2.ProtocolError):  # cut at 1 MiB: its last code may be a part
        http2.huffman_decode(blob)
    assert len(blob) == 1 << 20
    assert time.process_time() - start < 1.0  # bit by bit it took about 2.4 s


@pytest.mark.parametrize(("key", "value", "said"), [
    (http2.MAX_FRAME_SIZE, 0, "SETTINGS_MAX_FRAME_SIZE of 0"),
    (http2.MAX_FRAME_SIZE, 16383, "SETTINGS_MAX_FRAME_SIZE of 16383"),
    (http2.MAX_FRAME_SIZE, 1 << 24, "SETTINGS_MAX_FRAME_SIZE of 16777216"),
    (http2.INITIAL_WINDOW_SIZE, 1 << 31, "SETTINGS_INITIAL_WINDOW_SIZE of 2147483648"),
    (http2.ENABLE_PUSH, 2, "SETTINGS_ENABLE_PUSH of 2"),
    (http2.ENABLE_PUSH, 1, "SETTINGS_ENABLE_PUSH of 1"),
])
def test_settings_out_of_bounds_are_a_connection_error_naming_them(key: int, value: int, said: str) -> None:
    with pytest.raises(http2.ProtocolError, match=said) as raised:
        http2.check_settings({key: value})
    code = http2.FLOW_CONTROL_ERROR if key == http2.INITIAL_WINDOW_SIZE else http2.PROTOCOL_ERROR
    assert raised.value.code == code


def test_settings_within_bounds_pass() -> None:
    http2.check_settings({http2.MAX_FRAME_SIZE: 16384, http2.INITIAL_WINDOW_SIZE: (1 << 31) - 1,
                          http2.ENABLE_PUSH: 0, http2.HEADER_TABLE_SIZE: 0xFFFFFFFF, 0x99: 7})
    http2.check_settings({http2.MAX_FRAME_SIZE: (1 << 24) - 1})


def test_a_connections_decoder_builds_the_huffman_table_before_any_response():
    """The table costs tens of ms to build: a connection's set-up pays it, not a timed response."""
    http2._TABLES.clear()
    decoder = http2.HpackDecoder()
    assert http2._TABLES, "the table is built with the decoder"
    built = http2._TABLES[0]
    assert decoder.decode(b"\x82") == [(":method", "GET")]
    assert http2._TABLES[0] is built  # built once a process, reused


def test_a_block_decoded_again_is_the_same_until_the_table_changes() -> None:
    """decode_dict keeps blocks that only read the table: the same bytes give the same headers
    while the table stays, and are read afresh once it changes (an index then names another entry)."""
    decoder = http2.HpackDecoder(256)
    first = decoder.decode_dict(bytes.fromhex(
        "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3"))
    assert first[":status"] == "302" and not decoder.known  # it added to the table: not kept
    indexed = bytes((0x80 | 62, 0x80 | 65))  # the newest entry (location) and the oldest (:status 302)
    assert decoder.decode_dict(indexed) == {"location": "https://www.example.com", ":status": "302"}
    assert decoder.decode_dict(indexed) is decoder.known[indexed]  # kept: decoded once
    decoder.decode(bytes.fromhex("4883640effc1c0bf"))  # C.6.2: 307 in, 302 evicted
    assert not decoder.known
    assert decoder.decode_dict(indexed) == {":status": "307", "cache-control": "private"}  # the same bytes, read anew


def test_a_table_size_update_is_never_kept_as_a_known_block() -> None:
    decoder = http2.HpackDecoder(4096)
    block = http2.encode_int(0, 5, 0x20) + bytes((0x88,))  # size update to 0, then :status 200
    assert decoder.decode_dict(block) == {":status": "200"}
    assert decoder.limit == 0 and block not in decoder.known


def test_frames_read_from_a_bytearray_are_bytes_and_a_partial_one_waits() -> None:
    reader = http2.FrameReader()
    reader.first = False
    two = http2.frame(http2.DATA, 0, 1, b"abc") + http2.frame(http2.HEADERS, 5, 3, b"\x88")
    got = reader.feed(bytearray(two[:-3]))
    assert got == [(http2.DATA, 0, 1, b"abc")] and type(got[0][3]) is bytes
    assert reader.feed(two[-3:] + b"\x00") == [(http2.HEADERS, 5, 3, b"\x88")] and reader.buf == b"\x00"
