"""A loopback HTTP server that speaks enough of Triton's HTTP API to pass for one, and misbehaves
on demand: /v2/health/ready, /v2, /v2/models/<m>, /v2/models/<m>/config, /v2/models/<m>/infer,
/v2/models/<m>/stats, /v2/repository/models/<m>/load and /metrics.

Every answer is a field of ``HostileTriton`` that a test replaces (a value, or a callable of the
request for one that changes per call). It writes down each request (method, path, headers, body
length). Use it as a context manager: ``with HostileTriton() as srv: ... srv.url``.

A ``Reply`` may carry extra headers (``Inference-Header-Content-Length`` of a binary answer), and
a body framed by Content-Length (the default; ``length`` may declare another), chunked, or by
the connection's close, from ``stream`` (an iterable of pieces, e.g. ``endless()``) as long as
the client reads it. The shared-memory registration calls are accepted (200) and written down.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "m"
SHAPE = [4]


def identity_model(name: str = MODEL) -> dict[str, Any]:
    return {"name": name, "versions": ["1"], "platform": "python",
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, *SHAPE]}],
            "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, *SHAPE]}]}


def model_config(name: str = MODEL, instance_groups: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"name": name, "max_batch_size": 8, "backend": "python",
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": SHAPE}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": SHAPE}],
            "instance_group": instance_groups or [{"kind": "KIND_CPU", "count": 1}]}


def stats_doc(count: Any = 0, ns: Any = 0, name: str = MODEL, **parts: Any) -> dict[str, Any]:
    """A statistics reply whose every counter is ``count``/``ns`` unless ``parts`` names one
    (``queue=("x", 5)`` sets queue's count and ns)."""
    names = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")
    stats = {part: {"count": parts.get(part, (count, ns))[0], "ns": parts.get(part, (count, ns))[1]} for part in names}
    return {"model_stats": [{"name": name, "version": "1", "inference_count": parts.get("inference_count", count),
                             "execution_count": parts.get("execution_count", count), "inference_stats": stats}]}


def metrics_text(uuid: str = "GPU-00000000-hostile", util: Any = 0.5, mem_used: Any = 1e9, mem_total: Any = 8e10,
                 power: Any = 100.0, power_limit: Any = 700.0, energy: Any = 1000.0) -> str:
    """A /metrics page of one GPU; any value may be any text (``"1e300"``, ``"+Inf"``)."""
    label = f'{{gpu_uuid="{uuid}"}}'
    return "".join(f"{name}{label} {value}\n" for name, value in (
        ("nv_gpu_utilization", util), ("nv_gpu_memory_used_bytes", mem_used), ("nv_gpu_memory_total_bytes", mem_total),
        ("nv_gpu_power_usage", power), ("nv_gpu_power_limit", power_limit), ("nv_energy_consumption", energy)))


@dataclass
class Reply:
    status: int = 200
    body: Any = b""  # bytes, text, or a JSON-able value
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    framing: str = "length"  # "length" (Content-Length), "chunked", or "close" (the body ends at the close)
    stream: Callable[[], Iterable[bytes]] | None = None  # the body's pieces instead of ``body``
    length: int | None = None  # the Content-Length to declare, when not the body's

    def encoded(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


Answer = Reply | Callable[["Seen"], Reply]


def endless(piece: bytes = b"x" * 65536) -> Callable[[], Iterator[bytes]]:
    """A body that never ends (the client has to stop reading)."""
    return lambda: itertools.repeat(piece)


def sized(total: int, piece: int = 1 << 20) -> Callable[[], Iterator[bytes]]:
    """A body of ``total`` bytes of zeros, made a piece at a time."""
    block = b"\0" * piece

    def pieces() -> Iterator[bytes]:
        left = total
        while left > 0:
            yield block[: min(piece, left)]
            left -= piece
    return pieces


def binary_answer(header: Any, binary: bytes = b"\0" * 16, header_length: int | None = None) -> Reply:
    """An inference answer in Triton's binary form: a JSON header (any value, or raw bytes),
    then ``binary``; ``header_length`` declares another Inference-Header-Content-Length."""
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    length = len(head) if header_length is None else header_length
    return Reply(200, head + binary, "application/octet-stream", {"Inference-Header-Content-Length": str(length)})


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


def _ok_infer(seen: Seen) -> Reply:
    """A JSON inference reply with the request's batch of zeros (the body is not decoded)."""
    return Reply(200, {"model_name": MODEL, "outputs": [{"name": "OUTPUT0", "datatype": "FP32",
                                                         "shape": [1, *SHAPE], "data": [0.0] * SHAPE[0]}]})


@dataclass
class HostileTriton:
    model: str = MODEL
    ready: Answer = field(default_factory=lambda: Reply(200, b""))
    metadata: Answer | None = None  # None: identity_model(model)
    config: Answer | None = None  # None: model_config(model)
    infer: Answer = _ok_infer
    stats: Answer | None = None  # None: counters that grow with each inference answered
    metrics: Answer = field(default_factory=lambda: Reply(200, metrics_text(), "text/plain"))
    load: Answer = field(default_factory=lambda: Reply(200, {}))
    seen: list[Seen] = field(default_factory=list)
    answered: int = 0  # inferences answered 200
    port: int = 0  # where it listens on loopback (0: a free port)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifetime

    def __enter__(self) -> HostileTriton:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # the head and the body are separate writes: with Nagle on, the body waited for the
            # client's delayed ACK of the head, about 40 ms an answer
            disable_nagle_algorithm = True

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                owner._handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                owner._handle(self, "POST")

            def log_message(self, *_args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def where(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.where}"

    # ------------------------------------------------------------------ answers

    def _answer(self, seen: Seen) -> Reply:
        path = seen.path.split("?")[0]
        base = f"/v2/models/{self.model}"
        for prefix in (f"{base}/versions/1", base):
            if path.startswith(prefix):
                rest = path[len(prefix):]
                if rest == "" and seen.method == "GET":
                    return self._pick(self.metadata, seen) or Reply(200, identity_model(self.model))
                if rest == "/config":
                    return self._pick(self.config, seen) or Reply(200, model_config(self.model))
                if rest == "/ready":
                    return self._pick(self.ready, seen) or Reply(200, b"")
                if rest == "/stats":
                    return self._pick(self.stats, seen) or self._growing_stats()
                if rest == "/infer" and seen.method == "POST":
                    reply = self._pick(self.infer, seen) or Reply(500, {"error": "no answer"})
                    if reply.status == 200:
                        with self._lock:
                            self.answered += 1
                    return reply
        if path == "/v2/health/ready" or path == "/v2/health/live":
            return self._pick(self.ready, seen) or Reply(200, b"")
        if path == "/v2":
            return Reply(200, {"name": "triton", "version": "hostile", "extensions": ["statistics", "model_repository"]})
        if path == f"/v2/repository/models/{self.model}/load" and seen.method == "POST":
            return self._pick(self.load, seen) or Reply(200, {})
        if path == "/v2/repository/index" and seen.method == "POST":
            return Reply(200, [{"name": self.model, "version": "1", "state": "READY"}])
        if path == "/metrics":
            return self._pick(self.metrics, seen) or Reply(200, "", "text/plain")
        if path.startswith(("/v2/systemsharedmemory/", "/v2/cudasharedmemory/")) and seen.method == "POST":
            return Reply(200, {})
        return Reply(404, {"error": f"unknown model or path {path}"})

    def whole_answer(self, head: bytes, body: bytes) -> bytes:
        """The whole HTTP answer (Content-Length framed) to a request read by another server:
        this fake's Triton API beside a hostile peer on the same port (tests/reliability/hostile_peers.py)."""
        method, path = head.split(b"\r\n")[0].decode("latin-1").split(" ")[:2]
        headers = dict(line.decode("latin-1").split(":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
        seen = Seen(method, path, {k.strip(): v.strip() for k, v in headers.items()}, body)
        with self._lock:
            self.seen.append(seen)
        reply = self._answer(seen)
        data = reply.encoded()
        return (f"HTTP/1.1 {reply.status} X\r\nContent-Type: {reply.content_type}\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode() + data

    @staticmethod
    def _pick(answer: Answer | None, seen: Seen) -> Reply | None:
        if answer is None:
            return None
        return answer(seen) if callable(answer) else answer

    def _growing_stats(self) -> Reply:
        n = self.answered
        return Reply(200, stats_doc(n, n * 1_000_000, name=self.model, queue=(n, n * 100_000),
                                    compute_infer=(n, n * 500_000)))

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        seen = Seen(method, handler.path, {k: v for k, v in handler.headers.items()}, body)
        with self._lock:
            self.seen.append(seen)
        try:
            reply = self._answer(seen)
            data = reply.encoded()
        except Exception as exc:  # noqa: BLE001 - a test's answer that broke: a 500, and the test sees it
            reply, data = Reply(500), json.dumps({"error": f"fixture: {exc!r}"}).encode()
        handler.send_response(reply.status)
        handler.send_header("Content-Type", reply.content_type)
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        if reply.framing == "chunked":
            handler.send_header("Transfer-Encoding", "chunked")
        elif reply.framing == "close":
            handler.send_header("Connection", "close")
            handler.close_connection = True
        else:
            handler.send_header("Content-Length", str(len(data) if reply.length is None else reply.length))
        handler.end_headers()
        try:
            for piece in (reply.stream() if reply.stream is not None else [data]):
                if reply.framing == "chunked":
                    piece = f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if piece else b""
                handler.wfile.write(piece)
            if reply.framing == "chunked":
                handler.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client stopped reading (a stream it refused): this connection is done
            handler.close_connection = True


def remote_profile(path: Any, where: str, *, model: str = MODEL, extra: str = "", levels: str = "[1]") -> str:
    """A short remote sweep against ``where`` (host:port); its metrics_url on the same server."""
    path.write_text(
        f'[server]\nkind = "remote"\nurl = "http://{where}"\nmetrics_url = "http://{where}/metrics"\n'
        f'[model]\nname = "{model}"\n[load]\nconcurrency = {levels}\nwindow_ms = 300\nwarmup_s = 0\n'
        f'max_windows = 3\nstable_windows = 2\nworkers = 1\nrequest_timeout_s = 2\n'
        f'max_trials = 1\ncontended_percent = 100\n'  # the box-noise rule off (tests/conftest.py)
        f'[telemetry]\nhost_interval_s = 0.2\nnvml_interval_s = 0.2\n{extra}')
    return str(path)
