"""Where each request's time went inside Triton, from its own request trace, one tool run at a time.

The embedded server traces every request from its start (EmbeddedServer(trace_file=...)), in files
of 20,000 requests: switched at run time (v2/trace/setting), Triton 2.51 crashed or hung now and
then, here and on an H200. A ``TraceWindow`` notes when a tool's run began and ended; once the
server has stopped (and written its last file), ``collect`` reads the files one at a time and keeps
the requests that arrived in each run, from ``skip_s`` after its start (the tool's start-up) for
``span_s``. ``summarize`` gives per request the front end's time in and out, queue, compute input,
infer and output; the batches (requests that share one COMPUTE_START); how the requests arrived
(gaps between arrivals, and how far apart a batch's requests arrived); and how many sat in the
server at once. Why: two clients at the same concurrency can make the server batch differently,
and Triton's cumulative statistics show only that the sections differ, not how the arrivals did.
Triton's timestamps are CLOCK_MONOTONIC, as time.monotonic_ns() on Linux.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

WHOLE = ("HTTP_RECV_START", "REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
         "COMPUTE_OUTPUT_START", "COMPUTE_END", "HTTP_SEND_END")


class TraceWindow:
    """The part of a tool's run whose requests are read: ``skip_s`` after entry, for at most
    ``span_s``, and not past exit."""

    def __init__(self, skip_s: float, span_s: float) -> None:
        self.skip_ns, self.span_ns = int(skip_s * 1e9), int(span_s * 1e9)
        self.start_ns = self.end_ns = 0

    def __enter__(self) -> TraceWindow:
        self.start_ns = time.monotonic_ns() + self.skip_ns
        return self

    def __exit__(self, *exc: object) -> None:
        self.end_ns = min(time.monotonic_ns(), self.start_ns + self.span_ns)


def collect(trace_file: Path, windows: list[TraceWindow]) -> list[list[dict[str, int]]]:
    """Each window's traced requests (timestamps by name, ns), from every trace file of the
    server, read one file at a time."""
    out: list[list[dict[str, int]]] = [[] for _ in windows]
    partial: dict[int, dict[str, int]] = defaultdict(dict)
    for path in sorted(trace_file.parent.glob(trace_file.name + "*")):
        text = path.read_text(errors="replace").strip()
        if not text:
            continue
        try:
            events = json.loads(text if text.endswith("]") else text + "]")
        except ValueError:
            continue
        for e in events:
            for t in e.get("timestamps", ()):
                partial[e["id"]][t["name"]] = t["ns"]
        for key in [k for k, r in partial.items() if all(n in r for n in WHOLE)]:
            r = partial.pop(key)
            for i, w in enumerate(windows):
                if w.start_ns <= r["HTTP_RECV_START"] <= w.end_ns:
                    out[i].append(r)
                    break
    return out


def _mean_us(xs: list[int]) -> float | None:
    return statistics.fmean(xs) / 1e3 if xs else None


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def summarize(reqs: list[dict[str, int]]) -> dict[str, Any]:
    """The traced requests' sections (mean µs), batches, arrivals and requests in the server."""
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
    span_ns = arrivals[-1] - arrivals[0]
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
