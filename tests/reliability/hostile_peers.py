"""Issue 53's hostile peers, runnable, for the real CLI to meet as a user would
(scripts/tryout_hostile.sh, tests/reliability/test_hostile_tryout.py).

    python -m tests.reliability.hostile_peers CASE

prints the URL to give ``--url`` on its first line, then serves until it is signalled. Case
``ok`` is a well-behaved ``HostileTriton`` (model ``m``): the recordings made before the hostile ones. Each peer is the one the tests already meet (imported from them, not copied); the
Triton API around it (health, metadata, config, statistics) is ``HostileTriton``'s, answered on
the same port. gRPC peers listen on that port + 1 (Triton's gRPC port, as the CLI assumes).

    python -m tests.reliability.hostile_peers recordings DIR

writes two made-up hosts' recordings of one plan into DIR, the second of which measured its
last level twice (tests/engine/record/test_merge.py's hosts: the re-measured merge case).
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.net import http2
from engine.triton.transports.grpc_stream import STREAM
from tests.engine.load.test_grpc_stream_hostile import bad_setting, flood
from tests.engine.load.test_stream_counts import (
    HUGE,
    INFO,
    NESTED_JSON,
    Answer,
    _events,
    endless_size_line,
    huge_counts,
    mostly_bad,
    raw,
    sse_server,
)
from tests.engine.net.test_http2 import _huffman_encode
from tests.reliability.hostile_server import HostileTriton, Reply

MODEL = "toy"
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]


def stream_triton() -> HostileTriton:
    """A decoupled model with the streaming tests' inputs and outputs (PROMPT; TOKEN, COUNT)."""
    config = {"name": MODEL, "max_batch_size": INFO.max_batch_size, "backend": "python",
              "model_transaction_policy": {"decoupled": True},
              "input": [{"name": "PROMPT", "data_type": "TYPE_STRING", "dims": [1]}],
              "output": [{"name": "TOKEN", "data_type": "TYPE_STRING", "dims": [1]},
                         {"name": "COUNT", "data_type": "TYPE_INT64", "dims": [1]}],
              "instance_group": [{"kind": "KIND_CPU", "count": 1}]}
    metadata = {"name": MODEL, "versions": ["1"], "platform": "python", "inputs": INFO.inputs, "outputs": INFO.outputs}
    return HostileTriton(model=MODEL, metadata=Reply(200, metadata), config=Reply(200, config))


def _threaded(handler: Callable[[socket.socket], None], port: int) -> None:
    """A blocking peer (``handler`` per accepted socket, a thread each) on ``port``."""
    listener = socket.create_server(("127.0.0.1", port))

    def accept() -> None:
        while True:
            peer, _ = listener.accept()

            def one(peer: socket.socket = peer) -> None:
                with peer:
                    handler(peer)
            threading.Thread(target=one, daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()


def huffman_trailers() -> Handler:
    """A gRPC server that ends every stream with trailers whose grpc-message is a Huffman-coded
    string just under a mebibyte (HEADERS and CONTINUATIONs of 16 KiB): bit by bit, 2.4 s of our
    CPU each time (issue 53 item 7)."""
    unit = _huffman_encode(bytes(range(32, 127)) * 8)  # 8 of each code: whole bytes, no padding
    message = unit * (((1 << 20) - 4096) // len(unit))
    block = (b"\x00" + http2.encode_int(11, 7) + b"grpc-status" + http2.encode_int(2, 7) + b"13"
             + b"\x00" + http2.encode_int(12, 7) + b"grpc-message" + http2.encode_int(len(message), 7, 0x80) + message)
    pieces = [block[i:i + http2.DEFAULT_MAX_FRAME] for i in range(0, len(block), http2.DEFAULT_MAX_FRAME)]
    trailers = b"".join(http2.frame(http2.HEADERS if i == 0 else http2.CONTINUATION,
                                    (http2.END_STREAM if i == 0 else 0) | (http2.END_HEADERS if i == len(pieces) - 1 else 0),
                                    STREAM, piece) for i, piece in enumerate(pieces))
    answer = http2.frame(http2.HEADERS, http2.END_HEADERS, STREAM, b"\x88") + trailers  # :status 200, then the trailers

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(http2.settings_frame({}))
        frames = http2.FrameReader(1 << 20)
        try:
            await reader.readexactly(len(http2.PREFACE))
            while data := await reader.read(65536):
                if any(kind == http2.DATA and stream == STREAM for kind, _f, stream, _p in frames.feed(data)):
                    writer.write(answer)
                    await writer.drain()
        except (asyncio.IncompleteReadError, OSError, http2.ProtocolError):
            pass
        writer.close()
    return handle


SSE: dict[str, Callable[[], Answer]] = {  # generate_stream's answers (the HTTP port)
    "counts-sse": lambda: _events(*[b'{"TOKEN": "a", "COUNT": %d}' % HUGE] * 3),
    "sse-size-line": lambda: endless_size_line([0]),
    "sse-nested": lambda: raw(NESTED_JSON),
    "mostly-failed": lambda: mostly_bad([0]),
}
GRPC: dict[str, Callable[[], Handler]] = {  # on the HTTP port + 1
    "bad-setting": lambda: bad_setting, "counts-grpc": lambda: huge_counts, "huffman": huffman_trailers}
FLOODS = {"ping-flood": http2.frame(http2.PING, 0, 0, b"12345678"), "settings-flood": http2.settings_frame({})}
CASES = sorted([*SSE, *GRPC, *FLOODS, "ok"])


async def serve(case: str) -> str:
    """Start ``case``'s peer and the Triton API beside it; its URL."""
    if case == "ok":
        return HostileTriton().__enter__().url  # its threads serve until the process ends
    triton = stream_triton()
    if case in SSE:
        server = await sse_server(SSE[case](), otherwise=triton.whole_answer)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    never: Answer = raw(b"")
    for _ in range(50):  # a free pair of ports: the gRPC peer's, and the one below it for HTTP
        probe = socket.create_server(("127.0.0.1", 0))
        grpc_port = probe.getsockname()[1]
        try:
            http = await sse_server(never, otherwise=triton.whole_answer, port=grpc_port - 1)
        except OSError:
            probe.close()
            continue
        probe.close()
        if case in GRPC:
            await asyncio.start_server(GRPC[case](), "127.0.0.1", grpc_port)
        else:
            _threaded(flood(FLOODS[case]), grpc_port)
        return f"http://127.0.0.1:{http.sockets[0].getsockname()[1]}"
    raise SystemExit("no free pair of ports on loopback")


async def _main(case: str) -> None:
    print(await serve(case), flush=True)
    await asyncio.Event().wait()  # until signalled


def write_recordings(folder: Path) -> None:
    from tests.engine.record.test_merge import Host, recorded

    folder.mkdir(parents=True, exist_ok=True)
    for host in (Host("a", 1), Host("b", 2, trials={4: 2})):
        print(recorded(folder, host))


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "recordings":
        write_recordings(Path(argv[1]))
    elif len(argv) == 1 and argv[0] in CASES:
        asyncio.run(_main(argv[0]))
    else:
        raise SystemExit(f"usage: python -m tests.reliability.hostile_peers {{{','.join(CASES)}}} | recordings DIR")


if __name__ == "__main__":
    main(sys.argv[1:])
