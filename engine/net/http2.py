"""Just enough HTTP/2 (RFC 9113) and HPACK (RFC 7541) for gRPC, with no third-party client.

Why our own: a request written through grpc.aio leaves the process about 0.25 ms after its clock
is read (docs/results/toy_llm_streaming.md), 7 % of a small model's time to first token; a frame
written on an asyncio transport leaves in the same call. The load's gRPC transports keep the
connections' state (engine/triton/transports/grpc.py: unary calls, a stream each, several on one
connection; grpc_stream.py: one long stream per connection); this module is the pure part:
frames built and split, header blocks encoded (literals, no table: the same block for every
call) and decoded (the server's, with its dynamic table and Huffman strings, read a byte
at a time through a table), and a server's SETTINGS checked against RFC 9113's bounds.
"""

from __future__ import annotations

import struct
from collections import deque

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# frame types
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
# flags
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
# settings
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = range(1, 7)
DEFAULT_WINDOW = 65535
DEFAULT_MAX_FRAME = 16384
MAX_WINDOW = (1 << 31) - 1
MAX_HEADER_BLOCK = 1 << 20  # bytes of one header block (with its CONTINUATIONs) before it is refused
MAX_FRAME_LIMIT = (1 << 24) - 1
# error codes (RFC 9113 section 7)
NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, ENHANCE_YOUR_CALM = 0x0, 0x1, 0x3, 0x6, 0xB
SETTING_NAMES = {HEADER_TABLE_SIZE: "SETTINGS_HEADER_TABLE_SIZE", ENABLE_PUSH: "SETTINGS_ENABLE_PUSH",
                 MAX_CONCURRENT_STREAMS: "SETTINGS_MAX_CONCURRENT_STREAMS",
                 INITIAL_WINDOW_SIZE: "SETTINGS_INITIAL_WINDOW_SIZE", MAX_FRAME_SIZE: "SETTINGS_MAX_FRAME_SIZE",
                 MAX_HEADER_LIST_SIZE: "SETTINGS_MAX_HEADER_LIST_SIZE"}


class ProtocolError(Exception):
    """The bytes received are not HTTP/2 we can follow; ``code`` is the connection error's
    (what our GOAWAY says)."""

    def __init__(self, message: str, code: int = PROTOCOL_ERROR) -> None:
        super().__init__(message)
        self.code = code


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big") + payload


def settings_frame(values: dict[int, int]) -> bytes:
    return frame(SETTINGS, 0, 0, b"".join(k.to_bytes(2, "big") + v.to_bytes(4, "big") for k, v in values.items()))


def parse_settings(payload: bytes) -> dict[int, int]:
    if len(payload) % 6:
        raise ProtocolError("a SETTINGS frame whose length is not a multiple of 6")
    return {int.from_bytes(payload[i : i + 2], "big"): int.from_bytes(payload[i + 2 : i + 6], "big")
            for i in range(0, len(payload), 6)}


def check_settings(values: dict[int, int]) -> None:
    """A server's SETTINGS within RFC 9113's bounds (section 6.5.2), else the connection error
    naming the setting and its value. Unknown settings are ignored, as the RFC says."""
    for key, value in values.items():
        name = SETTING_NAMES.get(key)
        if key == ENABLE_PUSH and value != 0:  # a server may only say 0 (and never more than 1)
            raise ProtocolError(f"the server's {name} of {value}, where a server may only send 0 (PROTOCOL_ERROR)")
        if key == INITIAL_WINDOW_SIZE and value > MAX_WINDOW:
            raise ProtocolError(f"the server's {name} of {value}, past 2^31-1 (FLOW_CONTROL_ERROR)",
                                FLOW_CONTROL_ERROR)
        if key == MAX_FRAME_SIZE and not DEFAULT_MAX_FRAME <= value <= MAX_FRAME_LIMIT:
            raise ProtocolError(f"the server's {name} of {value}, outside {DEFAULT_MAX_FRAME}..{MAX_FRAME_LIMIT} "
                                "(PROTOCOL_ERROR)")


def goaway(code: int, last_stream: int = 0) -> bytes:
    return frame(GOAWAY, 0, 0, last_stream.to_bytes(4, "big") + code.to_bytes(4, "big"))


def window_update(stream: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, stream, increment.to_bytes(4, "big"))


def data_frames(stream: int, payload: bytes, max_frame: int) -> bytes:
    """``payload`` as DATA frames of at most ``max_frame`` bytes each, none ending the stream."""
    if len(payload) <= max_frame:
        return frame(DATA, 0, stream, payload)
    return b"".join(frame(DATA, 0, stream, payload[i : i + max_frame]) for i in range(0, len(payload), max_frame))


def unpadded(flags: int, payload: bytes) -> bytes:
    """A DATA or HEADERS frame's payload without its padding (and a HEADERS frame's priority)."""
    start, end = 0, len(payload)
    if flags & PADDED:
        if not payload or payload[0] >= len(payload):
            raise ProtocolError("a frame padded past its length")
        start, end = 1, len(payload) - payload[0]
    return payload[start:end]


# a frame's 9-byte header: the length's top 16 and low 8 bits, type, flags, stream (R bit included)
_HEAD = struct.Struct(">HBBBL")


class FrameReader:
    """Frames out of a byte stream: ``feed`` takes what the socket gave and returns the whole
    frames in it as (type, flags, stream, payload); a partial frame waits for the next bytes.
    Each read's frames are cut straight out of it; only a partial frame's bytes are kept."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.buf = bytearray()
        self.max_frame = max_frame
        self.first = True

    def feed(self, data: bytes) -> list[tuple[int, int, int, bytes]]:
        buf = self.buf
        if buf or self.first:  # a partial frame waits, or the first bytes: read from the buffer
            buf += data
            if self.first and len(buf) >= 5:
                if buf.startswith(b"HTTP/"):  # an HTTP/1.x server (Triton's HTTP port) answered our preface
                    raise ProtocolError(f"an HTTP/1.x answer ({bytes(buf[:12]).decode('latin-1')}...), "
                                        "not HTTP/2: is this the server's gRPC port?")
                self.first = False
            data = bytes(buf)
            buf.clear()
        elif type(data) is not bytes:  # frames' payloads are bytes, whatever the caller read into
            data = bytes(data)
        frames: list[tuple[int, int, int, bytes]] = []
        append = frames.append
        unpack = _HEAD.unpack_from
        limit = self.max_frame
        at, n = 0, len(data)
        while n - at >= 9:
            high, low, kind, flags, stream = unpack(data, at)
            length = high << 8 | low
            if length > limit:
                buf += data[at:]  # kept as the stream's bytes, as before the error
                raise ProtocolError(f"a frame of {length} bytes, past the {limit} we allow")
            end = at + 9 + length
            if end > n:
                break
            append((kind, flags, stream & 0x7FFFFFFF, data[at + 9 : end]))
            at = end
        if at < n:
            buf += data[at:]
        return frames


# -- HPACK

# RFC 7541 Appendix A
STATIC_TABLE: tuple[tuple[str, str], ...] = (
    (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"), (":path", "/index.html"),
    (":scheme", "http"), (":scheme", "https"), (":status", "200"), (":status", "204"), (":status", "206"),
    (":status", "304"), (":status", "400"), (":status", "404"), (":status", "500"), ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""), ("accept", ""),
    ("access-control-allow-origin", ""), ("age", ""), ("allow", ""), ("authorization", ""),
    ("cache-control", ""), ("content-disposition", ""), ("content-encoding", ""), ("content-language", ""),
    ("content-length", ""), ("content-location", ""), ("content-range", ""), ("content-type", ""),
    ("cookie", ""), ("date", ""), ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""),
    ("if-match", ""), ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""),
    ("if-unmodified-since", ""), ("last-modified", ""), ("link", ""), ("location", ""), ("max-forwards", ""),
    ("proxy-authenticate", ""), ("proxy-authorization", ""), ("range", ""), ("referer", ""), ("refresh", ""),
    ("retry-after", ""), ("server", ""), ("set-cookie", ""), ("strict-transport-security", ""),
    ("transfer-encoding", ""), ("user-agent", ""), ("vary", ""), ("via", ""), ("www-authenticate", ""),
)

# RFC 7541 Appendix B, as the code length of each symbol 0-255 and EOS (256): the code is
# canonical (codes of one length consecutive, in symbol order), so the lengths give it whole
HUFFMAN_LENGTHS = bytes((
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28,
    28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15,
    6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22,
    20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23,
    23, 24, 22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22,
    22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26,
    27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27,
    26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
))
EOS = 256


def huffman_codes() -> dict[tuple[int, int], int]:
    """(length, code) -> symbol, the canonical code the lengths give."""
    order = sorted(range(257), key=lambda s: (HUFFMAN_LENGTHS[s], s))
    codes: dict[tuple[int, int], int] = {}
    code, length = -1, HUFFMAN_LENGTHS[order[0]]
    for symbol in order:
        code = (code + 1) << (HUFFMAN_LENGTHS[symbol] - length)
        length = HUFFMAN_LENGTHS[symbol]
        codes[(length, code)] = symbol
    return codes


FAIL = 256  # the decoder's state once EOS is read: it stays there


def _huffman_tables() -> tuple[list[int], list[bytes], bytes]:
    """The decoder as a byte-wise state machine: a state is a node of the code's tree (0 the root,
    256 FAIL); entry ``state << 8 | byte`` gives the state after those 8 bits and the symbols they
    end. ``accept[state]``: the string may end there (at the root, or up to 7 bits of EOS's
    all-ones prefix)."""
    children: list[list[int]] = [[-1, -1]]  # internal nodes; a leaf is stored as -1 - symbol
    for (length, code), symbol in huffman_codes().items():
        node = 0
        for shift in range(length - 1, 0, -1):
            bit = (code >> shift) & 1
            if children[node][bit] < 0:
                children[node][bit] = len(children)
                children.append([-1, -1])
            node = children[node][bit]
        children[node][code & 1] = -1 - symbol
    accept = bytearray(FAIL + 1)
    node = 0
    for _ in range(8):  # the root and the all-ones path 7 deep
        accept[node] = 1
        node = children[node][1]
    # each state's walk over 4 bits first (4,096 walks, not 65,536 of 8 bits: the table is built
    # in each load worker), then a byte's entry as its high nibble's walk followed by its low one's
    states = len(children)
    half_next = [FAIL] * (states << 4)
    half_emit = [b""] * (states << 4)
    for state in range(states):
        for nibble in range(16):
            node, out = state, bytearray()
            for shift in (3, 2, 1, 0):
                child = children[node][(nibble >> shift) & 1]
                if child >= 0:
                    node = child
                elif child == -1 - EOS:
                    node = FAIL
                    break
                else:
                    out.append(-1 - child)
                    node = 0
            half_next[state << 4 | nibble] = node
            half_emit[state << 4 | nibble] = bytes(out)
    nxt = [FAIL] * ((FAIL + 1) << 8)
    emit = [b""] * ((FAIL + 1) << 8)
    for state in range(states):
        for high in range(16):
            middle, first = half_next[state << 4 | high], half_emit[state << 4 | high]
            at = state << 8 | high << 4
            if middle == FAIL:  # EOS within the high bits: the low ones are never read
                for low in range(16):
                    emit[at | low] = first
                continue
            row = middle << 4
            for low in range(16):
                nxt[at | low] = half_next[row | low]
                emit[at | low] = first + half_emit[row | low]
    return nxt, emit, bytes(accept)


_TABLES: list[tuple[list[int], list[bytes], bytes]] = []


def prepare_huffman() -> None:
    """Build the decoder's table now (about 15 ms of CPU, once a process): a connection's
    set-up pays it, not the first measured response that carries a Huffman string."""
    if not _TABLES:
        _TABLES.append(_huffman_tables())


def huffman_decode(data: bytes) -> bytes:
    """A Huffman-coded HPACK string, a byte at a time through a table built once (bit by bit,
    a 1 MiB header block took seconds of CPU)."""
    prepare_huffman()
    nxt, emit, accept = _TABLES[0]
    state = 0
    parts: list[bytes] = []
    append = parts.append
    for byte in data:
        at = state << 8 | byte
        append(emit[at])
        state = nxt[at]
    if state == FAIL:
        raise ProtocolError("a Huffman string holding EOS")
    if not accept[state]:
        raise ProtocolError("a Huffman string padded with other than EOS's first bits")
    return b"".join(parts)


def encode_int(value: int, prefix_bits: int, first: int = 0) -> bytes:
    """An HPACK integer with an N-bit prefix; ``first`` holds the first byte's other bits."""
    top = (1 << prefix_bits) - 1
    if value < top:
        return bytes((first | value,))
    out = bytearray((first | top,))
    value -= top
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(text: str) -> bytes:
    raw = text.encode()
    return encode_int(len(raw), 7) + raw


def encode_headers(headers: list[tuple[str, str]]) -> bytes:
    """A header block: each field a literal without indexing (no table to keep in step)."""
    return b"".join(b"\x00" + _string(name) + _string(value) for name, value in headers)


MAX_KNOWN_BLOCKS = 64  # header blocks a decoder keeps decoded (decode_dict): a call's headers and trailers


class HpackDecoder:
    """The server's header blocks, in order: one decoder per connection (the dynamic table is
    the connection's)."""

    def __init__(self, max_table: int = 4096) -> None:
        self.max_table = max_table  # what our SETTINGS allow (the default)
        self.limit = max_table  # what the server last set, at most max_table
        self.table: deque[tuple[str, str]] = deque()
        self.size = 0
        self.changes = 0  # how many times the dynamic table changed
        # blocks that left the table as it was, decoded (as a dict), while it stays so: a server
        # answers each call with the same few bytes of indices, decoded once
        self.known: dict[bytes, dict[str, str]] = {}
        prepare_huffman()  # made with the connection, before any response is timed

    def decode_dict(self, block: bytes) -> dict[str, str]:
        """``block`` decoded as a dict (a repeated name: its last value); shared between blocks of
        the same bytes, so never to be changed by the caller."""
        headers = self.known.get(block)
        if headers is not None:
            return headers
        changes = self.changes
        headers = dict(self.decode(block))
        if self.changes == changes and len(self.known) < MAX_KNOWN_BLOCKS:
            self.known[block] = headers  # it only read the table: the same bytes decode the same until it changes
        return headers

    def decode(self, block: bytes) -> list[tuple[str, str]]:
        headers: list[tuple[str, str]] = []
        at, n = 0, len(block)
        while at < n:
            byte = block[at]
            if byte & 0x80:  # indexed field
                index, at = self._int(block, at, 7)
                headers.append(self._entry(index))
            elif byte & 0x40:  # literal, added to the table
                name, value, at = self._literal(block, at, 6)
                headers.append((name, value))
                self._add(name, value)
            elif byte & 0x20:  # table size update
                size, at = self._int(block, at, 5)
                if size > self.max_table:
                    raise ProtocolError(f"an HPACK table size of {size}, past our {self.max_table}")
                self.limit = size
                self._changed()
                self._evict()
            else:  # literal, not added (0000) or never to be (0001)
                name, value, at = self._literal(block, at, 4)
                headers.append((name, value))
        return headers

    def _int(self, block: bytes, at: int, prefix_bits: int) -> tuple[int, int]:
        top = (1 << prefix_bits) - 1
        value = block[at] & top
        at += 1
        if value < top:
            return value, at
        shift = 0
        while True:
            if at >= len(block) or shift > 28:
                raise ProtocolError("a broken HPACK integer")
            byte = block[at]
            at += 1
            value += (byte & 127) << shift
            shift += 7
            if not byte & 128:
                return value, at

    def _str(self, block: bytes, at: int) -> tuple[str, int]:
        huffman = block[at] & 0x80 if at < len(block) else 0
        length, at = self._int(block, at, 7)
        if at + length > len(block):
            raise ProtocolError("an HPACK string past its block")
        raw = block[at : at + length]
        return (huffman_decode(raw) if huffman else raw).decode("latin-1"), at + length

    def _literal(self, block: bytes, at: int, prefix_bits: int) -> tuple[str, str, int]:
        index, at = self._int(block, at, prefix_bits)
        if index:
            name = self._entry(index)[0]
        else:
            name, at = self._str(block, at)
        value, at = self._str(block, at)
        return name, value, at

    def _entry(self, index: int) -> tuple[str, str]:
        if 1 <= index <= len(STATIC_TABLE):
            return STATIC_TABLE[index - 1]
        dynamic = index - len(STATIC_TABLE) - 1
        if 0 <= dynamic < len(self.table):
            return self.table[dynamic]
        raise ProtocolError(f"an HPACK index {index} past the table")

    def _changed(self) -> None:
        self.changes += 1
        if self.known:
            self.known.clear()

    def _add(self, name: str, value: str) -> None:
        self._changed()
        self.table.appendleft((name, value))
        self.size += len(name) + len(value) + 32
        self._evict()

    def _evict(self) -> None:
        while self.size > self.limit and self.table:
            name, value = self.table.pop()
            self.size -= len(name) + len(value) + 32
