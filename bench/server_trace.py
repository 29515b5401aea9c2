"""Where each request's time went inside Triton, from its own request trace, one tool at a time.

The embedded server runs with a trace file and tracing off (EmbeddedServer(trace_file=...)). A
``TraceWindow`` switches TIMESTAMPS tracing on a moment into a tool's run, for at most ``count``
requests, and off when the run ends (which flushes what was traced). ``summarize`` reads the new
part of the trace: per request the front end's time in and out, queue, compute input, infer and
output; the batches (requests that share one COMPUTE_START); how the requests arrived (gaps between
arrivals, and how far apart a batch's requests arrived); and how many sat in the server at once.
Why: two clients at the same concurrency can make the server batch differently, and Triton's
cumulative statistics show only that the sections differ, not how the arrivals did.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any


def _setting(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(f"{url}/v2/trace/setting", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as answer:
        return dict(json.loads(answer.read()))


class TraceWindow:
    """Tracing on from ``delay_s`` after entry until exit (or ``count`` requests), the new trace
    bytes kept in ``events`` after exit."""

    def __init__(self, url: str, trace_file: Path, delay_s: float, count: int) -> None:
        self.url, self.trace_file, self.delay_s, self.count = url, trace_file, delay_s, count
        self.events: list[dict[str, Any]] = []
        self.error: str | None = None
        self._sizes: dict[Path, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._start_later, daemon=True)

    def _files(self) -> list[Path]:
        return sorted(self.trace_file.parent.glob(self.trace_file.name + "*"))

    def _start_later(self) -> None:
        if self._stop.wait(self.delay_s):
            return
        try:
            _setting(self.url, {"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "trace_count": str(self.count),
                                "log_frequency": "0"})
        except (OSError, urllib.error.URLError) as exc:
            self.error = f"could not switch tracing on: {exc}"

    def __enter__(self) -> TraceWindow:
        self._sizes = {p: p.stat().st_size for p in self._files()}
        self._thread.start()
        return self

    def _written(self) -> int:
        return sum(p.stat().st_size - self._sizes.get(p, 0) for p in self._files())

    def _wait_for_flush(self, limit_s: float = 15.0) -> None:
        """Triton writes a setting's traces once the last request it traced is done, which can
        be after the switch: wait until the file grew and then held still for a moment."""
        deadline = time.monotonic() + limit_s
        last, still_since = -1, time.monotonic()
        while time.monotonic() < deadline:
            size = self._written()
            if size != last:
                last, still_since = size, time.monotonic()
            elif size > 0 and time.monotonic() - still_since >= 0.3:
                return
            time.sleep(0.05)
        if last <= 0:
            self.error = f"traced requests, but nothing reached {self.trace_file.name} within {limit_s:.0f} s"

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        traced = False
        try:
            left = _setting(self.url, {"trace_level": ["OFF"]}).get("trace_count", self.count)
            traced = self._thread.ident is not None and int(left) < self.count
        except (OSError, urllib.error.URLError, ValueError) as err:
            self.error = self.error or f"could not switch tracing off: {err}"
        if traced:
            self._wait_for_flush()
        for path in self._files():
            with path.open("rb") as f:
                f.seek(self._sizes.get(path, 0))
                chunk = f.read().decode(errors="replace").strip().lstrip("[,").rstrip("]")
            if chunk:
                try:
                    self.events.extend(json.loads(f"[{chunk}]"))
                except ValueError as err:
                    self.error = f"unreadable trace in {path.name}: {err}"


def requests_of(events: list[dict[str, Any]]) -> list[dict[str, int]]:
    """Each traced request's timestamps by name (ns), only requests traced from arrival to reply."""
    by_id: dict[int, dict[str, int]] = defaultdict(dict)
    for e in events:
        for t in e.get("timestamps", ()):
            by_id[e["id"]][t["name"]] = t["ns"]
    whole = ("HTTP_RECV_START", "REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
             "COMPUTE_OUTPUT_START", "COMPUTE_END", "HTTP_SEND_END")
    return [r for r in by_id.values() if all(k in r for k in whole)]


def _mean_us(xs: list[int]) -> float | None:
    return statistics.fmean(xs) / 1e3 if xs else None


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def summarize(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The traced requests' sections (mean µs), batches, arrivals and requests in the server."""
    reqs = requests_of(events)
    if len(reqs) < 2:
        return {"requests": len(reqs)}
    sections = {
        "front_in_us": ("HTTP_RECV_START", "REQUEST_START"),
        "queue_us": ("QUEUE_START", "COMPUTE_START"),
        "compute_input_us": ("COMPUTE_START", "COMPUTE_INPUT_END"),
        "compute_infer_us": ("COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START"),
        "compute_output_us": ("COMPUTE_OUTPUT_START", "COMPUTE_END"),
        "front_out_us": ("COMPUTE_END", "HTTP_SEND_END"),
        "in_server_us": ("HTTP_RECV_START", "HTTP_SEND_END"),
    }
    out: dict[str, Any] = {"requests": len(reqs)}
    for name, (a, b) in sections.items():
        out[name] = _mean_us([r[b] - r[a] for r in reqs])
    arrivals = sorted(r["HTTP_RECV_START"] for r in reqs)
    span_ns = max(r["HTTP_SEND_END"] for r in reqs) - arrivals[0]
    out["traced_s"] = span_ns / 1e9
    out["requests_per_s"] = len(reqs) / (span_ns / 1e9)
    # Little's law over the traced span: requests inside the server at once, on average
    out["in_server_mean"] = sum(r["HTTP_SEND_END"] - r["HTTP_RECV_START"] for r in reqs) / span_ns
    gaps = [(b - a) / 1e3 for a, b in zip(arrivals, arrivals[1:], strict=False)]
    mean_gap = statistics.fmean(gaps)
    out["arrival_gap_mean_us"] = mean_gap
    out["arrival_gap_cv"] = statistics.pstdev(gaps) / mean_gap if mean_gap else None
    out["arrivals_within_10us"] = sum(g <= 10 for g in gaps) / len(gaps)
    batches: dict[int, list[dict[str, int]]] = defaultdict(list)
    for r in reqs:
        batches[r["COMPUTE_START"]].append(r)
    sizes = [len(b) for b in batches.values()]
    out["batches"] = len(sizes)
    out["batch_mean"] = statistics.fmean(sizes)
    out["batch_p10"], out["batch_p90"] = _pct(sizes, 0.1), _pct(sizes, 0.9)
    # how far apart a batch's requests arrived: a batch gathered from one burst arrived together
    spreads = [(max(r["HTTP_RECV_START"] for r in b) - min(r["HTTP_RECV_START"] for r in b)) / 1e3
               for b in batches.values() if len(b) > 1]
    out["batch_arrival_spread_p50_us"] = _pct(spreads, 0.5)
    # the gap between a batch's start and the previous batch's on any instance: how often batches start
    starts = sorted(batches)
    out["batch_start_gap_mean_us"] = (statistics.fmean([(b - a) / 1e3 for a, b in zip(starts, starts[1:], strict=False)])
                                      if len(starts) > 1 else None)
    return out


def trace_line(s: dict[str, Any]) -> str:
    """One line for a run's trace summary."""
    if s.get("requests", 0) < 2:
        return f"trace: {s.get('requests', 0)} requests traced (nothing to read)"

    def f(key: str, spec: str = ".0f") -> str:
        v = s.get(key)
        return format(v, spec) if v is not None else "n/a"

    return (f"trace: {s['requests']} req over {f('traced_s', '.2f')} s ({f('requests_per_s')}/s); µs front in {f('front_in_us')}"
            f" queue {f('queue_us')} input {f('compute_input_us')} infer {f('compute_infer_us')} output {f('compute_output_us')}"
            f" front out {f('front_out_us')} in server {f('in_server_us')}; in server at once {f('in_server_mean', '.1f')};"
            f" batch {f('batch_mean', '.1f')} (p10 {f('batch_p10')}, p90 {f('batch_p90')}), a batch's arrivals span"
            f" {f('batch_arrival_spread_p50_us')} µs (p50), batches start every {f('batch_start_gap_mean_us')} µs;"
            f" arrival gap {f('arrival_gap_mean_us', '.1f')} µs cv {f('arrival_gap_cv', '.2f')},"
            f" {100 * s['arrivals_within_10us']:.0f} % within 10 µs")
