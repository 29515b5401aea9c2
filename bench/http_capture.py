"""What a client sends a Triton server over HTTP, read off the wire: a loopback TCP relay that
records the client's bytes, and a reader of those bytes into the tensors of each inference
request (KServe v2 with Triton's binary-data extension). Lets a bench compare the requests of
two tools (perf_analyzer and ours) input by input, whatever framing each uses."""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field

# one inference request's inputs: (name, datatype, shape, raw bytes), by name
Tensors = tuple[tuple[str, str, tuple[int, ...], bytes], ...]


@dataclass
class Relay:
    """Listens on 127.0.0.1 (``port`` once started) and relays each connection to ``upstream``,
    keeping each connection's client-to-server bytes."""

    upstream: tuple[str, int]
    port: int = 0
    sent: list[bytearray] = field(default_factory=list)  # per connection, in accept order
    _listener: socket.socket | None = None
    _threads: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Relay:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._listener is not None:
            try:  # wakes the thread blocked in accept(): close() alone leaves it there until join's timeout
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
        for t in self._threads:
            t.join(timeout=5)

    def _spawn(self, target: object, *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(t)
        t.start()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed: the relay is done
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
                server.settimeout(None)
            except OSError:  # the client sees its connection closed, not a hang
                client.close()
                continue
            record = bytearray()
            self.sent.append(record)
            self._spawn(self._pump, client, server, record)
            self._spawn(self._pump, server, client, None)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, record: bytearray | None) -> None:
        try:
            while chunk := src.recv(1 << 16):
                if record is not None:
                    record.extend(chunk)
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class NotReadable(ValueError):
    """The bytes are not HTTP/1.1 requests with a Content-Length (the message says where)."""


def infer_requests(stream: bytes) -> list[Tensors]:
    """The inputs of each ``POST .../infer`` in one connection's client bytes; other requests
    (metadata, statistics) are skipped. Inputs sent as JSON ``data`` are kept as their JSON text."""
    found = []
    at = 0
    while at < len(stream):
        end = stream.find(b"\r\n\r\n", at)
        if end < 0:
            raise NotReadable(f"an unfinished request head at byte {at}")
        lines = stream[at:end].decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        if "chunked" in headers.get("transfer-encoding", ""):
            raise NotReadable(f"a chunked request at byte {at}")
        length = int(headers.get("content-length", "0"))
        body = stream[end + 4:end + 4 + length]
        if len(body) != length:
            raise NotReadable(f"a body cut short at byte {end + 4}")
        at = end + 4 + length
        method, path = lines[0].split(" ")[:2]
        if method == "POST" and path.endswith("/infer"):
            found.append(_tensors(body, int(headers.get("inference-header-content-length", length))))
    return found


def _tensors(body: bytes, header_length: int) -> Tensors:
    header = json.loads(body[:header_length])
    offset = header_length
    tensors = []
    for tensor in header.get("inputs", []):
        size = (tensor.get("parameters") or {}).get("binary_data_size")
        if size is None:
            raw = json.dumps(tensor.get("data")).encode()
        else:
            raw = body[offset:offset + size]
            offset += size
        tensors.append((tensor["name"], tensor["datatype"], tuple(tensor["shape"]), raw))
    return tuple(sorted(tensors))  # by name: the order of a request's inputs is not its content
