"""What the kept latency histograms cost: per window, building the histogram and encoding the
window event as the recorder does, with and without it, and the bytes it adds; per merged
window, folding N hosts' windows into one (decoding their recorded JSON, summing the
histograms, reading the percentiles, the rest of the window's fold), for N = 2..64.

CPU time (process time), median of rounds. Latency samples are drawn from a log-normal
distribution (median 5 ms): made-up inputs whose spread sets the histogram's size, stated with
the figures. Nothing is asserted: a measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from engine.analysis.percentiles import latency_stats
from engine.events import ClientAudit, ServerBreakdown, WindowResult, event_from_dict
from engine.record.merge_fold import merged_window
from engine.record.recorder import to_json
from engine.redact import Redactor

MEDIAN_NS = 5e6


def _window(samples: np.ndarray, histogram: bool, t0: float = 1.7e9) -> WindowResult:
    n = int(samples.size)
    return WindowResult(
        ts=t0 + 1, level=64, index=3, warmup=False, t_start=t0, t_end=t0 + 1, requests=n, errors=0,
        throughput_rps=float(n), throughput_ips=float(n), latency=latency_stats(samples, histogram=histogram),
        server=ServerBreakdown(request_count=n, inference_count=n, execution_count=n // 4, queue=0.001,
                               compute_infer=0.003, server_total=0.004, avg_batch_size=4.0, client_minus_server=0.001),
        audit=ClientAudit(cpu_percent=40.0, cpu_cores=16, loop_lag_p99=0.001, sent=n, write_p50=1e-5,
                          first_byte_p50=0.004, client_delay_p50=1e-4),
        stable_so_far=True, others_cpu=0.01, steal=0.0)


def _cpu_us(fn: Callable[[], object], rounds: int, repeat: int) -> float:
    fn()
    times = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(repeat):
            fn()
        times.append((time.process_time() - start) / repeat * 1e6)
    return statistics.median(times)


def per_window(sizes: list[int], sigma: float, rounds: int) -> list[dict]:
    rng = np.random.default_rng(0)
    redactor = Redactor()
    rows = []
    for n in sizes:
        samples = rng.lognormal(np.log(MEDIAN_NS), sigma, n).astype(np.int64)
        repeat = max(3, 20_000 // max(n, 1) if n < 20_000 else 3)
        row: dict = {"requests": n, "sigma": sigma}
        for kind, hist in (("without", False), ("with", True)):
            build = _cpu_us(lambda h=hist, s=samples: latency_stats(s, histogram=h), rounds, repeat)
            event = _window(samples, hist)
            encode = _cpu_us(lambda e=event: to_json(redactor.value(e.to_dict())), rounds, repeat)
            row[kind] = {"build_us": round(build, 1), "encode_us": round(encode, 1),
                         "bytes": len(to_json(redactor.value(event.to_dict())))}
        row["buckets"] = _window(samples, True).latency.histogram.buckets  # type: ignore[union-attr]
        rows.append(row)
    return rows


def per_merge(hosts: list[int], requests: int, sigma: float, rounds: int) -> list[dict]:
    rng = np.random.default_rng(1)
    texts = [to_json(_window(rng.lognormal(np.log(MEDIAN_NS), sigma, requests).astype(np.int64), True).to_dict())
             for _ in range(max(hosts))]
    rows = []
    for n in hosts:
        names = [f"h{i}" for i in range(n)]
        decoded = [event_from_dict(json.loads(t)) for t in texts[:n]]

        def fold(windows: list = decoded, names: list[str] = names, n: int = n) -> object:
            return merged_window(windows, names, n)

        def decode_and_fold(n: int = n, names: list[str] = names) -> object:
            return merged_window([event_from_dict(json.loads(t)) for t in texts[:n]], names, n)  # type: ignore[misc]

        repeat = max(3, 200 // n)
        fold_us = _cpu_us(fold, rounds, repeat)
        both_us = _cpu_us(decode_and_fold, rounds, repeat)
        rows.append({"hosts": n, "requests_per_host_window": requests, "sigma": sigma, "fold_us": round(fold_us, 1),
                     "decode_and_fold_us": round(both_us, 1),
                     "merged_windows_per_s_one_core": round(1e6 / both_us, 1)})
    return rows


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     epilog="Fits: any box, no server or GPU; about a minute.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sigma", type=float, default=0.5, help="log-normal spread of the made-up latencies")
    parser.add_argument("--requests", type=int, default=2000, help="requests per host window in the merge timing")
    parser.add_argument("--out", type=Path, default=None, help="JSON results here (default: $OUT or .bench-out/)")
    return parser


def run(args: argparse.Namespace) -> int:
    if args.rounds < 1 or args.sigma <= 0 or args.requests < 1:
        print("merge_cost: --rounds, --sigma and --requests must be > 0", file=sys.stderr)
        return 2
    from bench.common import out_dir, stamp

    windows = per_window([100, 1_000, 10_000, 100_000], args.sigma, args.rounds)
    print(f"per window (log-normal latencies, median 5 ms, sigma {args.sigma}); CPU µs, median of {args.rounds} rounds")
    print(f"{'requests':>9} {'buckets':>8} {'build':>16} {'encode':>16} {'bytes':>15}")
    for r in windows:
        w, h = r["without"], r["with"]
        print(f"{r['requests']:>9} {r['buckets']:>8} {w['build_us']:>7.0f} -> {h['build_us']:<6.0f} "
              f"{w['encode_us']:>7.0f} -> {h['encode_us']:<6.0f} {w['bytes']:>6} -> {h['bytes']:<6}")
    merges = per_merge([2, 4, 8, 16, 32, 64], args.requests, args.sigma, args.rounds)
    print(f"\nmerging N hosts' windows ({args.requests} requests each): CPU µs per merged window")
    print(f"{'hosts':>6} {'fold':>10} {'decode+fold':>12} {'windows/s':>10}")
    for r in merges:
        print(f"{r['hosts']:>6} {r['fold_us']:>10.0f} {r['decode_and_fold_us']:>12.0f} {r['merged_windows_per_s_one_core']:>10.0f}")
    path = args.out or out_dir() / f"merge_cost-{stamp()}.json"
    path.write_text(json.dumps({"per_window": windows, "per_merge": merges}, indent=1))
    print(f"\n{path}")
    return 0
