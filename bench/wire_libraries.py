"""Our HTTP/1.1, HTTP/2 frames and HPACK (engine/net/http1.py, engine/net/http2.py) against h11, h2 and
hpack, on bytes Triton sent: µs per message for the same bytes on both sides, alternating rounds.

The payloads (bench/wire_payloads/, rewritten by ``--capture``) were read off the wire from the
embedded Triton's identity model at batch 32 (a 2,048-byte FP32 output, the size of a ViT-B/32
embedding): a KServe v2 HTTP/1.1 response with Triton's binary-tensor headers, and the server's
side of one HTTP/2 connection carrying three unary ModelInfer calls (its SETTINGS, WINDOW_UPDATE
and PING, then per call HEADERS + DATA + trailers HEADERS). Measured per message:

  http1           one response, as the load's HTTP connection frames it (``parse_head``, then
                  Content-Length; the body stays in the connection's buffer) against h11's client
                  (receive_data, then next_event until EndOfMessage: Response, Data, EndOfMessage).
  http2           one gRPC response on a warm connection (HEADERS + DATA + trailers, one read), as
                  grpc_stream parses frames (FrameReader.feed, unpadded, the header block through
                  HpackDecoder) against h2's client H2Connection (receive_data, its events, and
                  acknowledge_received_data for each DATA as h2 asks).
  http2_lean      the same, h2 with its checks and normalisation of received headers off.
  http2_frames    the frame layers alone, no HPACK: FrameReader.feed and unpadded against h2's
                  FrameBuffer (hyperframe), as H2Connection uses it.
  hpack_repeated  both header blocks of one response (3 + 1 bytes: Triton's gRPC indexes every
                  field after a connection's first response) on a warm decoder: ours against
                  hpack.Decoder.
  hpack_first     a connection's first response's two blocks (78 + 15 bytes) with a fresh decoder,
                  as Triton sends them (plain literals: Triton's gRPC sends no Huffman strings).
  hpack_huffman   the same headers as a connection's first blocks, Huffman-coded (hpack.Encoder's
                  literals with indexing, as a server or proxy that Huffman-codes sends them).

Each message is timed on its own (perf_counter_ns around the parse only: h11's and h2's request
side, which their state machines need before a response, is outside the span); the timer's own
cost, measured in the same round, is taken off. Per round and side: the median message, and the
mean without the slowest 0.5 % (on a shared box another process takes the core for milliseconds
now and then). Rounds alternate which side goes first. h11, h2 and hpack are
not project dependencies: install them into a directory and pass it as ``--libs``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.net import http1, http2

PAYLOADS = Path(__file__).resolve().parent / "wire_payloads"
HTTP1_FILE = "triton_http1_identity_b32.bin"
GRPC_FILE = "triton_grpc_modelinfer_identity_b32.bin"
GRPC_METHOD = "/inference.GRPCInferenceService/ModelInfer"
CAPTURE_BATCH = 32
TRIM = 200  # the mean leaves out the slowest 1/TRIM of the spans (0.5 %)

# what differs between the sides, printed with the figures
DIFFERS = {
    "http1": "ours reads status, Content-Length, Inference-Header-Content-Length and the close flag from the "
             "head and leaves the body in the buffer; h11 parses and validates every header into a list and "
             "hands the body over as a bytes copy (Data event)",
    "http2": "both give the response's headers, the body bytes and the trailers; h2 also validates the headers "
             "(its default), keeps per-stream state machines and flow-control windows, and returns headers as "
             "bytes (header_encoding=None, its default); ours returns str; gRPC message framing on neither side",
    "http2_lean": "as http2, with h2's own checks of received headers off (the cheapest h2 configuration; "
                  "ours checks no header beyond what it reads)",
    "http2_frames": "ours: FrameReader.feed and unpadded; h2: FrameBuffer.add_data and its frames (hyperframe "
                    "objects, flags parsed, lengths checked), the piece of H2Connection.receive_data below its "
                    "state machines; the header blocks stay undecoded on both sides",
    "hpack_repeated": "both return [(str, str)]; hpack checks the header list size (its default 64 KiB)",
    "hpack_first": "a fresh decoder per connection on both sides (its construction timed); ours builds its "
                   "Huffman table once per process (not timed here: see 'huffman table build')",
    "hpack_huffman": "as hpack_first; the strings are Huffman-coded, as Triton's own gRPC does not send them",
}


# --------------------------------------------------------------------------- payloads


@dataclass(frozen=True)
class Payloads:
    http1: bytes  # one whole response
    preamble: bytes  # the server's connection frames before the first response (SETTINGS, ...)
    responses: tuple[tuple[tuple[int, int, bytes], ...], ...]  # per call: its frames (type, flags, payload)


def split_frames(raw: bytes) -> list[tuple[int, int, int, bytes]]:
    return http2.FrameReader(http2.MAX_FRAME_LIMIT).feed(raw)


def frame_bytes(frames: tuple[tuple[int, int, bytes], ...], stream: int) -> bytes:
    """A call's frames on ``stream`` (the captured bytes with the stream id rewritten)."""
    return b"".join(http2.frame(kind, flags, stream, payload) for kind, flags, payload in frames)


def load_payloads(folder: Path = PAYLOADS) -> Payloads:
    http1_raw = (folder / HTTP1_FILE).read_bytes()
    frames = split_frames((folder / GRPC_FILE).read_bytes())
    preamble = b"".join(http2.frame(k, f, s, p) for k, f, s, p in frames if s == 0 and k != http2.HEADERS)
    streams: dict[int, list[tuple[int, int, bytes]]] = {}
    for kind, flags, stream, payload in frames:
        if stream:
            streams.setdefault(stream, []).append((kind, flags, payload))
    responses = tuple(tuple(streams[s]) for s in sorted(streams))
    return Payloads(http1_raw, preamble, responses)


def header_blocks(response: tuple[tuple[int, int, bytes], ...]) -> list[bytes]:
    """A call's header blocks (its HEADERS frames' payloads; Triton sends no CONTINUATION)."""
    return [http2.unpadded(flags, payload) for kind, flags, payload in response if kind == http2.HEADERS]


def huffman_blocks(payloads: Payloads) -> list[bytes]:
    """The first call's header lists as a Huffman-coding server sends a connection's first blocks:
    hpack.Encoder (literals added to the table, Huffman strings)."""
    import hpack

    plain = http2.HpackDecoder()
    encoder = hpack.Encoder()
    return [encoder.encode(plain.decode(block), huffman=True) for block in header_blocks(payloads.responses[0])]


# --------------------------------------------------------------------------- the sides


class Http1Ours:
    """One response as HttpConnection.buffer_updated frames it when the whole response came in one
    read: the head parsed, the body's end known from Content-Length, the body left in the buffer."""

    name = "ours (engine/net/http1.py)"

    def __init__(self, raw: bytes) -> None:
        self.buf = bytearray(raw)
        self.filled = len(raw)

    def before(self) -> None:
        pass

    def parse(self) -> tuple[int, int, int | None, int]:
        head = http1.parse_head(self.buf, self.filled)
        if head is None or head.content_length is None:
            raise http1.BadResponse("the payload is not a whole Content-Length response")
        end = head.head_len + head.content_length
        if self.filled < end:
            raise http1.BadResponse("the payload's body is short")
        return head.status, head.content_length, head.inference_header_length, end - head.head_len


class Http1H11:
    """h11's client on one keep-alive connection: the request sent through it (outside the timed
    span), then the response's bytes fed and its events read to EndOfMessage."""

    name = "h11"

    def __init__(self, raw: bytes) -> None:
        import h11

        self.h11 = h11
        self.raw = raw
        self.conn = h11.Connection(h11.CLIENT)
        self.request = h11.Request(method="POST", target="/v2/models/identity/infer",
                                   headers=[("Host", "127.0.0.1:8000"), ("Content-Length", "0")])

    def before(self) -> None:
        conn = self.conn
        if conn.our_state is self.h11.DONE:
            conn.start_next_cycle()
        conn.send(self.request)
        conn.send(self.h11.EndOfMessage())

    def parse(self) -> tuple[int, int, int | None, int]:
        h11 = self.h11
        conn = self.conn
        conn.receive_data(self.raw)
        response = conn.next_event()
        body = 0
        while True:
            event = conn.next_event()
            if type(event) is h11.Data:
                body += len(event.data)
            elif type(event) is h11.EndOfMessage:
                break
            else:
                raise ValueError(f"h11 gave {event!r} inside a response")
        headers = dict(response.headers)
        ihl = headers.get(b"inference-header-content-length")
        return response.status_code, int(headers[b"content-length"]), None if ihl is None else int(ihl), body


def _merged(headers: list[tuple[str, str]]) -> dict[str, str]:
    return dict(headers)


class Http2Ours:
    """One gRPC response as grpc_stream's data_received takes it: frames split by FrameReader,
    DATA appended to the stream's buffer (with the unacknowledged count), a header block decoded
    once its END_HEADERS frame came. The connection (preamble and first call) is fed first."""

    name = "ours (engine/net/http2.py)"

    def __init__(self, payloads: Payloads, messages: list[bytes]) -> None:
        self.frames = http2.FrameReader()
        self.hpack = http2.HpackDecoder()
        self.unacked = 0
        self.messages = messages
        self.next = 0
        self.receive(payloads.preamble + frame_bytes(payloads.responses[0], 1))

    def before(self) -> None:
        pass

    def receive(self, data: bytes) -> tuple[dict[str, str], bytes, dict[str, str]]:
        headers: dict[str, str] = {}
        trailers: dict[str, str] = {}
        body = bytearray()
        block = bytearray()
        for kind, flags, _stream, payload in self.frames.feed(data):
            if kind == http2.DATA:
                self.unacked += len(payload)
                body += http2.unpadded(flags, payload)
            elif kind == http2.HEADERS or kind == http2.CONTINUATION:
                if kind == http2.HEADERS:
                    payload = http2.unpadded(flags, payload)
                    if flags & http2.PRIORITY_FLAG:
                        payload = payload[5:]
                block += payload
                if flags & http2.END_HEADERS:
                    decoded = dict(self.hpack.decode(bytes(block)))
                    block = bytearray()
                    if headers:
                        trailers = decoded
                    else:
                        headers = decoded
        return headers, bytes(body), trailers

    def parse(self) -> tuple[dict[str, str], bytes, dict[str, str]]:
        data = self.messages[self.next]
        self.next += 1
        return self.receive(data)


class Http2H2:
    """h2's client side: each call's stream opened by send_headers (outside the timed span, as a
    client must before a response), then the response's bytes given to receive_data and its events
    read, each DATA acknowledged as h2 asks."""

    name = "h2"

    def __init__(self, payloads: Payloads, messages: list[bytes], lean: bool = False) -> None:
        import h2.config
        import h2.connection
        import h2.events

        self.events = h2.events
        # lean: h2's checks and normalisation of received headers off (its defaults: on)
        config = h2.config.H2Configuration(client_side=True, validate_inbound_headers=not lean,
                                           normalize_inbound_headers=not lean)
        self.conn = h2.connection.H2Connection(config)
        self.conn.initiate_connection()
        self.request = [(":method", "POST"), (":scheme", "http"), (":path", GRPC_METHOD),
                        (":authority", "127.0.0.1:8001"), ("content-type", "application/grpc"), ("te", "trailers")]
        self.messages = messages
        self.next = 0
        self.stream = 1
        self.conn.send_headers(1, self.request, end_stream=True)
        self.conn.data_to_send()
        self.receive(payloads.preamble + frame_bytes(payloads.responses[0], 1))

    def before(self) -> None:
        self.stream += 2
        self.conn.send_headers(self.stream, self.request, end_stream=True)
        self.conn.data_to_send()

    def receive(self, data: bytes) -> tuple[dict, bytes, dict]:
        ev = self.events
        conn = self.conn
        headers: dict = {}
        trailers: dict = {}
        body = bytearray()
        for event in conn.receive_data(data):
            kind = type(event)
            if kind is ev.DataReceived:
                body += event.data
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif kind is ev.ResponseReceived:
                headers = dict(event.headers)
            elif kind is ev.TrailersReceived:
                trailers = dict(event.headers)
        return headers, bytes(body), trailers

    def parse(self) -> tuple[dict, bytes, dict]:
        data = self.messages[self.next]
        self.next += 1
        return self.receive(data)


class FramesOurs:
    """The frame layer alone: FrameReader.feed and each DATA/HEADERS payload unpadded (no HPACK)."""

    def __init__(self, messages: list[bytes]) -> None:
        self.reader = http2.FrameReader()
        self.messages = messages
        self.next = 0

    def before(self) -> None:
        pass

    def parse(self) -> list[tuple[int, int, bytes]]:
        data = self.messages[self.next]
        self.next += 1
        return [(kind, stream, http2.unpadded(flags, payload) if kind <= http2.HEADERS else payload)
                for kind, flags, stream, payload in self.reader.feed(data)]


class FramesH2:
    """h2's frame layer alone (h2.frame_buffer.FrameBuffer over hyperframe, as H2Connection uses
    it): the bytes added, the frames iterated; a HEADERS frame's block is left undecoded."""

    def __init__(self, messages: list[bytes]) -> None:
        from h2.frame_buffer import FrameBuffer

        self.buffer = FrameBuffer(server=False)
        self.buffer.max_frame_size = http2.DEFAULT_MAX_FRAME
        self.messages = messages
        self.next = 0

    def before(self) -> None:
        pass

    def parse(self) -> list[tuple[int, int, bytes]]:
        data = self.messages[self.next]
        self.next += 1
        self.buffer.add_data(data)
        return [(f.type, f.stream_id, bytes(f.data)) for f in self.buffer]


class HpackSide:
    """Header blocks through a decoder: ``fresh`` makes a new decoder per message (a connection's
    first blocks), else one decoder warmed with ``warm`` first."""

    def __init__(self, make: Callable[[], object], blocks: list[bytes], warm: list[bytes], fresh: bool) -> None:
        self.make = make
        self.blocks = blocks
        self.fresh = fresh
        self.decoder = make()
        for block in warm:
            self.decoder.decode(block)  # type: ignore[attr-defined]

    def before(self) -> None:
        pass

    def parse(self) -> list[list[tuple[str, str]]]:
        decoder = self.make() if self.fresh else self.decoder
        decode = decoder.decode  # type: ignore[attr-defined]
        return [list(decode(block)) for block in self.blocks]


# --------------------------------------------------------------------------- timing


def timer_cost_ns(samples: int = 20000) -> float:
    """The median cost of an empty timed span (two perf_counter_ns calls)."""
    clock = time.perf_counter_ns
    spans = []
    for _ in range(samples):
        start = clock()
        spans.append(clock() - start)
    spans.sort()
    return float(spans[len(spans) // 2])


def time_side(side: object, messages: int, overhead_ns: float) -> tuple[float, float]:
    """µs per message, each message's parse timed on its own, the timer's cost taken off: the
    median span (what a message costs when no other process takes the core mid-parse: the box is
    shared) and the mean of all but the slowest 1/TRIM (with the garbage collections a side's
    allocations bring; without the rare span in which another process had the core, milliseconds
    on a shared 2-core box, which would swamp it)."""
    clock = time.perf_counter_ns
    before = side.before  # type: ignore[attr-defined]
    parse = side.parse  # type: ignore[attr-defined]
    spans = [0] * messages
    for i in range(messages):
        before()
        start = clock()
        parse()
        spans[i] = clock() - start
    spans.sort()
    kept = spans[: max(1, len(spans) - len(spans) // TRIM)]
    return (statistics.median(spans) - overhead_ns) / 1000, (sum(kept) / len(kept) - overhead_ns) / 1000


@dataclass
class Case:
    name: str
    what: str
    ours: Callable[[], object]  # a fresh side for a round
    theirs: Callable[[], object]
    theirs_name: str


def cases(payloads: Payloads, messages: int) -> list[Case]:
    import hpack

    http1_raw = payloads.http1
    http1_body = len(http1_raw) - http1_raw.find(b"\r\n\r\n") - 4
    repeated = payloads.responses[1]

    def stream_messages(first_stream: int) -> list[bytes]:
        return [frame_bytes(repeated, first_stream + 2 * i) for i in range(messages + 1)]

    h2_messages = stream_messages(3)
    first = header_blocks(payloads.responses[0])
    again = header_blocks(repeated)
    huff = huffman_blocks(payloads)
    sizes = lambda blocks: " + ".join(str(len(b)) for b in blocks)  # noqa: E731
    return [
        Case("http1", f"HTTP/1.1 response, {len(http1_raw)} bytes ({http1_body} of them body)", lambda: Http1Ours(http1_raw), lambda: Http1H11(http1_raw), "h11"),
        Case("http2", f"gRPC ModelInfer response, HEADERS + DATA + trailers, {len(h2_messages[0])} bytes, warm connection",
             lambda: Http2Ours(payloads, h2_messages), lambda: Http2H2(payloads, h2_messages), "h2"),
        Case("http2_lean", "the same response, h2 with validate_inbound_headers and normalize_inbound_headers off",
             lambda: Http2Ours(payloads, h2_messages), lambda: Http2H2(payloads, h2_messages, lean=True), "h2 lean"),
        Case("http2_frames", "the same response's frames alone, no HPACK: frame layer against frame layer",
             lambda: FramesOurs(h2_messages), lambda: FramesH2(h2_messages), "h2 frames"),
        Case("hpack_repeated", f"repeated blocks, {sizes(again)} bytes, warm decoder",
             lambda: HpackSide(http2.HpackDecoder, again, first, False),
             lambda: HpackSide(hpack.Decoder, again, first, False), "hpack"),
        Case("hpack_first", f"a connection's first blocks as Triton sends them (no Huffman), {sizes(first)} bytes",
             lambda: HpackSide(http2.HpackDecoder, first, [], True),
             lambda: HpackSide(hpack.Decoder, first, [], True), "hpack"),
        Case("hpack_huffman", f"a connection's first blocks, Huffman-coded, {sizes(huff)} bytes",
             lambda: HpackSide(http2.HpackDecoder, huff, [], True),
             lambda: HpackSide(hpack.Decoder, huff, [], True), "hpack"),
    ]


def huffman_table_build_ms(repeats: int = 3) -> list[float]:
    """Our Huffman decoding table's one-time build, CPU ms (once per process: each load worker pays
    it at its first Huffman string); built ``repeats`` times."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        http2._huffman_tables()
        times.append((time.process_time() - start) * 1000)
    return times


# --------------------------------------------------------------------------- capture


def capture(folder: Path) -> None:
    """Start the embedded identity server, send it an HTTP/1.1 and three gRPC ModelInfer calls
    at batch 32, and keep the server's bytes in ``folder``."""
    import socket

    import numpy as np
    from tritonclient.grpc import service_pb2

    from engine.server.embedded import EmbeddedServer

    folder.mkdir(parents=True, exist_ok=True)
    data = np.arange(CAPTURE_BATCH * 16, dtype=np.float32).tobytes()
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [CAPTURE_BATCH, 16], "datatype": "FP32",
                                     "parameters": {"binary_data_size": len(data)}}],
                         "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]},
                        separators=(",", ":")).encode()
    with EmbeddedServer(model="identity", variant="cpu") as srv:
        body = header + data
        request = (f"POST /v2/models/identity/infer HTTP/1.1\r\nHost: 127.0.0.1:{srv.http_port}\r\n"
                   "Content-Type: application/octet-stream\r\n"
                   f"Inference-Header-Content-Length: {len(header)}\r\nContent-Length: {len(body)}\r\n\r\n"
                   ).encode() + body
        with socket.create_connection(("127.0.0.1", srv.http_port)) as s:
            for _ in range(2):  # the second answer on a keep-alive connection is kept
                s.sendall(request)
                buf = b""
                while (head := http1.parse_head(buf)) is None or len(buf) < head.head_len + (head.content_length or 0):
                    chunk = s.recv(65536)
                    if not chunk:
                        raise ConnectionError("the server closed the HTTP connection")
                    buf += chunk
        (folder / HTTP1_FILE).write_bytes(buf)

        msg = service_pb2.ModelInferRequest(model_name="identity", id="req-000001")
        tensor = msg.inputs.add()
        tensor.name, tensor.datatype = "INPUT0", "FP32"
        tensor.shape.extend([CAPTURE_BATCH, 16])
        msg.outputs.add().name = "OUTPUT0"
        msg.raw_input_contents.append(data)
        grpc_msg = msg.SerializeToString()
        grpc_msg = b"\0" + len(grpc_msg).to_bytes(4, "big") + grpc_msg
        block = http2.encode_headers([(":method", "POST"), (":scheme", "http"), (":path", GRPC_METHOD),
                                      (":authority", f"127.0.0.1:{srv.grpc_port}"),
                                      ("content-type", "application/grpc"), ("te", "trailers")])
        raw = bytearray()
        reader = http2.FrameReader(http2.MAX_FRAME_LIMIT)
        with socket.create_connection(("127.0.0.1", srv.grpc_port)) as g:
            g.sendall(http2.PREFACE + http2.settings_frame({http2.ENABLE_PUSH: 0}))
            for stream in (1, 3, 5):
                g.sendall(http2.frame(http2.HEADERS, http2.END_HEADERS, stream, block)
                          + http2.frame(http2.DATA, http2.END_STREAM, stream, grpc_msg))
                ended = False
                while not ended:
                    chunk = g.recv(65536)
                    if not chunk:
                        raise ConnectionError("the server closed the gRPC connection")
                    raw += chunk
                    for kind, flags, sid, _ in reader.feed(chunk):
                        if kind == http2.SETTINGS and not flags & http2.ACK:
                            g.sendall(http2.frame(http2.SETTINGS, http2.ACK, 0))
                        ended = ended or (kind == http2.HEADERS and flags & http2.END_STREAM and sid == stream)
        (folder / GRPC_FILE).write_bytes(bytes(raw))
    print(f"captured {folder / HTTP1_FILE} ({len(buf)} bytes), {folder / GRPC_FILE} ({len(raw)} bytes)")


# --------------------------------------------------------------------------- stage


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Fits: any box, no server or GPU; about a minute. Needs h11, h2 and hpack importable: e.g.\n"
               "  python -m pip install --target /tmp/wirelibs h11 h2 hpack\n"
               "  python -m bench wire_libraries --libs /tmp/wirelibs")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each timing ours then theirs or the reverse")
    parser.add_argument("--messages", type=int, default=5000, help="messages timed per side per round")
    parser.add_argument("--libs", default="", help="a directory holding h11, h2 and hpack (put first on sys.path)")
    parser.add_argument("--only", default="", help="comma-separated cases (http1,http2,http2_lean,http2_frames,hpack_repeated,"
                                                   "hpack_first,hpack_huffman); all by default")
    parser.add_argument("--capture", action="store_true",
                        help="first rewrite bench/wire_payloads/ from the embedded identity server")
    return parser


def spread(rows: list[dict], key: str, digits: int = 2) -> str:
    """The rounds' median of ``key``, with its min-max."""
    values = [row[key] for row in rows]
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{name} {version(name)}" for name in ("h11", "h2", "hpack"))


def run(args: argparse.Namespace) -> int:
    if args.libs:
        sys.path.insert(0, args.libs)
    try:
        import h2  # noqa: F401
        import h11  # noqa: F401
        import hpack  # noqa: F401
    except ImportError as exc:
        print(f"wire_libraries: needs h11, h2 and hpack ({exc}); install them into a directory and pass --libs",
              file=sys.stderr)
        return 2
    if args.rounds < 3 or args.messages < 1:
        print("wire_libraries: --rounds must be >= 3 and --messages > 0", file=sys.stderr)
        return 2
    if args.capture:
        capture(PAYLOADS)
    payloads = load_payloads()
    chosen = cases(payloads, args.messages)
    if args.only:
        wanted = set(args.only.split(","))
        chosen = [c for c in chosen if c.name in wanted]
        if not chosen:
            print(f"wire_libraries: no case in --only {args.only!r}", file=sys.stderr)
            return 2
    print(f"wire_libraries: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, Python {sys.version.split()[0]}, {versions()}")
    print(f"payloads: {PAYLOADS.relative_to(PAYLOADS.parent.parent)}/ (Triton identity model, batch {CAPTURE_BATCH})")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs")
    builds = huffman_table_build_ms()
    print(f"huffman table build (ours, once per process, not in hpack_huffman's figures): "
          f"{statistics.median(builds):.1f} ms CPU ({min(builds):.1f}-{max(builds):.1f}, {len(builds)} builds)")
    print(f"{args.rounds} rounds x {args.messages} messages per side; µs of wall time per message (each timed on its own,"
          " the timer's cost taken off): the median message and the mean without the slowest 0.5 %;"
          " ratio = theirs / ours\n")
    results = {}
    for case in chosen:
        print(f"== {case.name}: {case.what}")
        print(f"   differs: {DIFFERS[case.name]}")
        anchor = case.theirs_name
        print(f"   {'round':>5}  {'order':<12} {'ours':>7} {anchor:>9} {'ratio':>6}   "
              f"{'ours':>7} {anchor:>9} {'ratio':>6}   (µs/message: median | trimmed mean)")
        for make in (case.ours, case.theirs):  # imports and first-use costs out of the rounds
            time_side(make(), min(args.messages, 200), 0.0)
        rows = []
        for r in range(args.rounds):
            overhead = timer_cost_ns()
            order = ("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")
            got = {}
            for who in order:
                side = case.ours() if who == "ours" else case.theirs()
                got[who] = time_side(side, args.messages, overhead)
            (om, oa), (tm, ta) = got["ours"], got["theirs"]
            rows.append({"order": order[0] + " first", "ours_median_us": om, "theirs_median_us": tm,
                         "ratio_median": tm / om, "ours_mean_us": oa, "theirs_mean_us": ta, "ratio_mean": ta / oa,
                         "timer_ns": overhead})
            print(f"   {r + 1:>5}  {order[0] + ' first':<12} {om:>7.2f} {tm:>9.2f} {tm / om:>5.1f}x   "
                  f"{oa:>7.2f} {ta:>9.2f} {ta / oa:>5.1f}x")

        for stat in ("median", "mean"):
            print(f"   {'median' if stat == 'median' else 'trimmed mean'}: ours {spread(rows, 'ours_' + stat + '_us')} µs, "
                  f"{anchor} {spread(rows, 'theirs_' + stat + '_us')} µs; {anchor}/ours {spread(rows, 'ratio_' + stat, 1)}x")
        print(f"   timer {statistics.median(row['timer_ns'] for row in rows):.0f} ns/span, taken off\n")
        results[case.name] = {"what": case.what, "differs": DIFFERS[case.name], "anchor": anchor, "rounds": rows}
    load = os.getloadavg()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in load)}")
    from bench.common import out_dir, stamp

    path = out_dir() / f"wire_libraries-{stamp()}.json"
    path.write_text(json.dumps({"versions": versions(), "messages": args.messages, "load_after": load,
                                "huffman_table_build_ms": builds,
                                "cases": results}, indent=1))
    print(f"written: {path}")
    return 0
