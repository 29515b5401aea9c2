"""Unary gRPC on our own HTTP/2 against perf_analyzer `-i grpc`.

Our load engine with load.transport = grpc (our own HTTP/2, engine/triton/transports/grpc.py) runs
against perf_analyzer 2.41 `-i grpc` on one embedded Triton and one small model, at each concurrency
level, in alternating rounds (the order reverses every round). Each run is 3 windows of
--window-ms with both tools' stability rule off (--stability 1000), as docs/results/grpc_cpu.md
ran, and our contended mark off (--contended-percent 100): perf_analyzer has none. Per level: each tool's throughput per round, its mean and round-to-round spread
((max - min) / mean), and ours / perf_analyzer as mean [min-max] of the rounds' ratios; each
tool's client CPU per request; the load average before and after, since the box may be shared.

    python -m bench grpc_h2 --levels 1,4 --rounds 3

Writes grpc_h2.json to $OUT or .bench-out/, rewritten after every run.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.common import core_split, out_dir, pin_clients
from bench.tools import Measure, RunAccount, ensure_perf_analyzer, run_ours, run_perf_analyzer
from bench.triton_trace import TraceWindow, server_flags, split

# ours on our own HTTP/2, perf_analyzer -i grpc (grpc.aio's column, grpc_aio, went with that
# transport: docs/results/grpc_own_http2.md keeps its figures)
# base: ours again, its load workers run from another checkout (--base-root: e.g. `git archive
# <commit> engine | tar -x -C DIR`), for a before/after in one run
# Variants of the anchor, to find what limits it where ours reads above it:
#   pa_async  its callback client on --max-threads threads (16), where its default (synchronous)
#             client blocks one thread per request in flight
#   pa_ch1    one gRPC channel (TCP connection) per request in flight, where it shares one among 6
#   pa_x2     two perf_analyzer processes side by side at half the concurrency each, summed
TOOLS = ("grpc", "pa", "pa_async", "pa_ch1", "pa_x2", "base")
PA_TOOLS = ("pa", "pa_async", "pa_ch1", "pa_x2")
NAMES = {"grpc": "ours grpc (own HTTP/2)", "pa": "perf_analyzer -i grpc", "pa_async": "perf_analyzer -i grpc --async",
         "pa_ch1": "perf_analyzer -i grpc, a channel per request", "pa_x2": "2 perf_analyzers at c/2, summed",
         "base": "ours grpc, --base-root's workers"}


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                epilog="Fits: any box, CPU variant; about 1.5 minutes at the defaults (2 tools x 2 levels x 3 rounds, about 7 s a run).")
    p.add_argument("--model", default="identity", help="an embedded model (the repo's identity: 16 FP32 in, 16 out)")
    p.add_argument("--variant", default="cpu")
    p.add_argument("--levels", default="1,4", help="concurrency levels")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tools", default="grpc,pa", help=f"of {', '.join(TOOLS)}")
    p.add_argument("--base-root", default="", help="the base tool's source tree: a folder holding engine/ (the"
                                                   " load workers' code there; the session's is this checkout's)")
    p.add_argument("--window-ms", type=int, default=2000)
    p.add_argument("--stability", type=float, default=1000.0, help="percent (1000: off, exactly --max-windows windows)")
    p.add_argument("--max-windows", type=int, default=3)
    p.add_argument("--workers", type=int, default=0, help="our load workers (0 = automatic)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--client-cores", type=int, default=0,
                   help="both clients on this many cores of their own, the server on the rest (0: all share every core)")
    p.add_argument("--trace-count", type=int, default=0,
                   help="Triton's own timestamps for this many requests of each run (0: off; bench/triton_trace.py). "
                   "Tracing has crashed Triton 2.51 (SIGSEGV) over CUDA shm and in short CPU runs: a measuring aid")
    p.add_argument("--trace-after-s", type=float, default=1.5, help="seconds into a run before its trace starts")
    p.add_argument("--contended-percent", type=float, default=100.0,
                   help="our levels' contended mark (load.contended_percent): 100, never, as perf_analyzer has no such"
                        " rule and the box is shared; the load average is printed beside the figures instead")
    return p


def _row(m: Measure) -> dict[str, Any]:
    return {"ok": m.ok, "status": m.status, "infer_s": m.throughput, "p50_ms": m.p50_ms, "p99_ms": m.p99_ms,
            "cpu_us_per_req": m.client_cpu_us_per_request, "errors": m.extra.get("errors"),
            "client_bound": m.extra.get("client_bound"), "mean_ms": m.mean_ms, "server_us": m.server_us_per_request,
            "server_sections": m.extra.get("server_sections"),
            # perf_analyzer's own split of its latency, µs
            **{k: m.extra[k] for k in ("client_send_us", "network_server_us", "client_recv_us") if k in m.extra}}


def _one(tool: str, url: str, model: str, level: int, args: argparse.Namespace, pa: Any) -> dict[str, Any]:
    if tool == "pa_x2":
        return _two_pas(pa, url, model, level, args)
    if tool in PA_TOOLS:
        extra = ("--async",) if tool == "pa_async" else ()
        if tool == "pa_ch1":  # tritonclient's grpc_client.cc reads it once per process
            pa = (pa[0], {**pa[1], "TRITON_CLIENT_GRPC_CHANNEL_MAX_SHARE_COUNT": "1"})
        return _row(run_perf_analyzer(pa, url, model, level, args, extra=extra, protocol="grpc"))
    if tool == "base":
        from engine.load import pool

        # the workers' PYTHONPATH leads with it, and their cwd (``-m`` puts it first on sys.path) is it
        ours, pool._PACKAGE_ROOT = pool._PACKAGE_ROOT, os.path.abspath(args.base_root)
        here = os.getcwd()
        os.chdir(pool._PACKAGE_ROOT)
        try:
            return _row(run_ours(url, model, level, args, transport="grpc"))
        finally:
            os.chdir(here)
            pool._PACKAGE_ROOT = ours
    return _row(run_ours(url, model, level, args, transport=tool))


def _two_pas(pa: Any, url: str, model: str, level: int, args: argparse.Namespace) -> dict[str, Any]:
    """Two perf_analyzers at once, at level // 2 and the rest: throughput summed; one RunAccount
    over both charges their CPU to what the server served meanwhile."""
    with RunAccount(url, model, str(pa[0]), include_self=False, level=level) as acct, ThreadPoolExecutor(max_workers=2) as pool:
        both = list(pool.map(lambda c: run_perf_analyzer(pa, url, model, c, args, protocol="grpc"), (level // 2, level - level // 2)))
    ok = all(m.ok for m in both)
    summed = acct.fill(Measure("perf_analyzer x2", ok, "; ".join(m.status for m in both),
                               throughput=sum(m.throughput or 0.0 for m in both) if ok else None,
                               p50_ms=max(m.p50_ms or 0.0 for m in both) if ok else None,
                               p99_ms=max(m.p99_ms or 0.0 for m in both) if ok else None))
    return {**_row(summed), "each_infer_s": [m.throughput for m in both]}


def _band(xs: list[float]) -> str:
    return f"{sum(xs) / len(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]" if xs else "n/a"


def _spread(xs: list[float]) -> str:
    return f"{100 * (max(xs) - min(xs)) / (sum(xs) / len(xs)):.0f} %" if len(xs) > 1 else "n/a"


def summary(rows: list[dict[str, Any]], levels: list[int], tools: list[str]) -> list[str]:
    """The table: per level and tool, throughput per round, mean, spread, ratio to perf_analyzer."""
    lines = ["| c | tool | infer/s per round | mean | spread | / perf_analyzer, mean [min-max] | client CPU µs/req |"
             + (" / perf_analyzer --async |" if "pa_async" in tools else ""),
             "|---|---|---|---|---|---|---|" + ("---|" if "pa_async" in tools else "")]
    for level in levels:
        at = [r for r in rows if r["level"] == level]
        rounds = sorted({r["round"] for r in at})

        def got(tool: str, rnd: int, key: str = "infer_s", at: list[dict[str, Any]] = at) -> float | None:
            for r in at:
                if r["round"] == rnd and r["tool"] == tool and r["ok"]:
                    return r[key]
            return None

        for tool in tools:
            per = [got(tool, rnd) for rnd in rounds]
            vals = [x for x in per if x is not None]
            ratios = [a / b for rnd in rounds if (a := got(tool, rnd)) is not None and (b := got("pa", rnd))]
            cpu = [x for rnd in rounds if (x := got(tool, rnd, "cpu_us_per_req")) is not None]
            shown = ", ".join(f"{x:,.0f}" if x is not None else "none" for x in per)
            mean = f"{sum(vals) / len(vals):,.0f}" if vals else "n/a"
            ratio = "1 (the anchor)" if tool == "pa" else _band(ratios)
            line = (f"| {level} | {NAMES[tool]} | {shown} | {mean} | {_spread(vals)} | {ratio} | "
                    + (f"{sum(cpu) / len(cpu):,.0f} |" if cpu else "n/a |"))
            if "pa_async" in tools:
                to_async = [a / b for rnd in rounds if (a := got(tool, rnd)) is not None and (b := got("pa_async", rnd))]
                line += " 1 |" if tool == "pa_async" else f" {_band(to_async)} |"
            lines.append(line)
    return lines


def trace_summary(rows: list[dict[str, Any]], levels: list[int], tools: list[str]) -> list[str]:
    """Per level and tool, means over the traced rounds: the client's mean latency, the span Triton's
    gRPC front end held each request (read whole to response handed over) and its parts, and the
    rest, which lies on the client's side of the front end."""
    lines = ["| c | tool | rounds | client mean, ms | front end, ms | of it: in / queue / compute / out, ms "
             "| client's side, ms |", "|---|---|---:|---:|---:|---|---:|"]
    for level in levels:
        for tool in tools:
            got = [r for r in rows if r["level"] == level and r["tool"] == tool and r["ok"] and r.get("trace")
                   and r.get("mean_ms") is not None]
            if not got:
                continue

            def mean(key: str, got: list[dict[str, Any]] = got) -> float:
                return sum(r["trace"][key] for r in got) / len(got)

            client = sum(r["mean_ms"] for r in got) / len(got)
            lines.append(f"| {level} | {NAMES[tool]} | {len(got)} | {client:.2f} | {mean('front_end_ms'):.2f} | "
                         f"{mean('in_ms'):.2f} / {mean('queue_ms'):.2f} / {mean('compute_ms'):.2f} / "
                         f"{mean('out_ms'):.2f} | {client - mean('front_end_ms'):.2f} |")
    return lines


def run(args: argparse.Namespace) -> int:
    from engine.server.embedded import EmbeddedServer

    levels = [int(x) for x in args.levels.split(",") if x]
    tools = [t for t in args.tools.split(",") if t]
    if any(t not in TOOLS for t in tools):
        print(f"grpc_h2: --tools: each one of {', '.join(TOOLS)}")
        return 2
    if "base" in tools and not os.path.isdir(os.path.join(args.base_root, "engine")):
        print("grpc_h2: the base tool needs --base-root, a folder holding engine/")
        return 2
    pa = ensure_perf_analyzer() if set(PA_TOOLS) & set(tools) else None
    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    out = out_dir() / "grpc_h2.json"
    logs = out_dir() / "grpc_h2_server"  # kept: a server that dies mid-run says why there
    logs.mkdir(parents=True, exist_ok=True)
    clients, server_cores = core_split(args.client_cores)
    tracing = args.trace_count > 0
    flags = server_flags(logs, args.trace_count) if tracing else ()
    for old in logs.glob("trace.json*"):
        old.unlink()
    traced = 0  # trace files written so far: the next run's is trace.json.<traced>
    with EmbeddedServer(model=args.model, variant=args.variant, log_dir=logs, cpus=server_cores,
                        server_flags=flags) as srv:
        pin_clients(clients, server_cores)
        print(f"== {args.model} on embedded Triton at {srv.http_url} (gRPC {srv.grpc_url}); load average "
              f"{load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; {os.cpu_count()} CPUs", flush=True)
        for level in levels:
            for rnd in range(args.rounds):
                order = tools if rnd % 2 == 0 else list(reversed(tools))
                for tool in order:
                    started = time.monotonic()
                    if tracing:
                        # one in level/4 requests: the count comes within seconds at any level
                        with TraceWindow(srv.http_url, logs, traced, args.trace_count, max(1, level // 4),
                                         args.trace_after_s) as window:
                            got = _one(tool, srv.http_url, args.model, level, args, pa)
                        if window.entries is None:
                            print(f"grpc_h2: fewer than {args.trace_count} traced requests in this run; tracing off "
                                  "for the rest", flush=True)
                            tracing = False
                        else:
                            traced += 1
                            got["trace"] = split(window.entries)
                    else:
                        got = _one(tool, srv.http_url, args.model, level, args, pa)
                    row = {"level": level, "round": rnd, "tool": tool, **got,
                           "wall_s": round(time.monotonic() - started, 1), "load1": round(os.getloadavg()[0], 2)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    out.write_text(json.dumps({"args": vars(args), "load_before": load_before, "rows": rows}, indent=1))
    load_after = os.getloadavg()
    out.write_text(json.dumps({"args": vars(args), "load_before": load_before, "load_after": load_after, "rows": rows},
                              indent=1))
    print()
    print("\n".join(summary(rows, levels, tools)))
    if any(r.get("trace") for r in rows):
        print()
        print("\n".join(trace_summary(rows, levels, tools)))
    print(f"\nload average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, after "
          f"{load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} (1, 5, 15 min); {os.cpu_count()} CPUs")
    return 0
