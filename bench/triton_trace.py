"""Triton's own per-request timestamps (its trace, level TIMESTAMPS), for a bench run.

The server starts with tracing set up but off (`server_flags`); a run turns it on once it is under
way (`TraceWindow`) for a fixed count of requests, which Triton writes as one file
(`trace.json.<n>`, log-frequency = that count). `split` reads one file: the time each request
spent between Triton's gRPC front end having read it whole (GRPC_WAITREAD_END) and having handed
its response to the transport (GRPC_SEND_END), and within that its queue and compute. A client's
mean latency minus that span is the time on the client's side of the server's front end: its own
stack, the wire, and the kernel (and the front end's completion-queue wait before it reads).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any


def server_flags(folder: Path, per_file: int) -> tuple[str, ...]:
    """tritonserver flags: tracing set up, off, one file per `per_file` traces."""
    return ("--trace-config", f"triton,file={folder / 'trace.json'}", "--trace-config", "level=OFF",
            "--trace-config", "count=-1", "--trace-config", f"triton,log-frequency={per_file}")


def _setting(http_url: str, body: dict[str, Any]) -> None:
    req = urllib.request.Request(f"{http_url}/v2/trace/setting", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - the bench's own server
        resp.read()


class TraceWindow:
    """Turns Triton's trace on `after_s` into a run, for `count` requests at one in `rate`; off again
    at exit. `entries` is the file it should have written, read, or None when it did not come (the
    run had fewer requests than that: tracing then stays off for the rest of the bench, since a
    partial batch would spill into the next run's file)."""

    def __init__(self, http_url: str, folder: Path, index: int, count: int, rate: int, after_s: float) -> None:
        self.http_url, self.count, self.rate = http_url, count, rate
        self.expected = folder / f"trace.json.{index}"
        self._timer = threading.Timer(after_s, self._on)
        self.entries: list[dict[str, Any]] | None = None

    def _on(self) -> None:
        _setting(self.http_url, {"trace_level": ["TIMESTAMPS"], "trace_rate": str(self.rate),
                                 "trace_count": str(self.count)})

    def __enter__(self) -> TraceWindow:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        self._timer.join()
        _setting(self.http_url, {"trace_level": ["OFF"]})
        deadline = time.monotonic() + 5.0  # Triton writes the file once the count is reached
        while self.entries is None and time.monotonic() < deadline:
            try:
                self.entries = json.loads(self.expected.read_text())
            except (FileNotFoundError, json.JSONDecodeError):  # not there yet, or still being written
                time.sleep(0.1)


def _requests(entries: list[dict[str, Any]]) -> list[dict[str, int]]:
    by_id: dict[int, dict[str, int]] = {}
    for entry in entries:
        stamps = by_id.setdefault(entry["id"], {})
        for stamp in entry.get("timestamps", ()):
            stamps.setdefault(stamp["name"], int(stamp["ns"]))
    return list(by_id.values())


NEEDED = ("GRPC_WAITREAD_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_END", "GRPC_SEND_END")


def split(entries: list[dict[str, Any]]) -> dict[str, float] | None:
    """Means in ms over the traced requests that have every stamp: `front_end_ms` (read whole to
    response handed over), and within it `in_ms` (read to Triton's request start), `queue_ms`,
    `compute_ms`, `out_ms` (compute end to response handed over). None when no request has them."""
    full = [r for r in _requests(entries) if all(k in r for k in NEEDED)]
    if not full:
        return None

    def mean(a: str, b: str) -> float:
        return sum(r[b] - r[a] for r in full) / len(full) / 1e6

    return {"requests": float(len(full)), "front_end_ms": mean("GRPC_WAITREAD_END", "GRPC_SEND_END"),
            "in_ms": mean("GRPC_WAITREAD_END", "REQUEST_START"), "queue_ms": mean("QUEUE_START", "COMPUTE_START"),
            "compute_ms": mean("COMPUTE_START", "COMPUTE_END"), "out_ms": mean("COMPUTE_END", "GRPC_SEND_END")}
