"""Sequence models: our load engine against perf_analyzer `--sequence-length` on a sequence model.

Both tools drive the embedded `accumulator` (Triton's sequence batcher, direct; a running sum per
sequence whose state the model checks on every step) over HTTP (or gRPC: --transports) at each concurrency level (the
sequences in flight), with sequences of --sequence-length steps and no variation, in alternating
rounds (the order reverses every round). Each run is --max-windows windows of --window-ms with
both tools' stability rule off (--stability 1000) and our contended mark off. Per level and tool:
infer/s per round, its mean and spread, ours / perf_analyzer as mean [min-max] of the rounds'
ratios; sequences/s (each tool's own count: ours the sequences whose last step was answered,
perf_analyzer's its "Sequence count" line); p50 and p99; ours also the first step's p99
apart from the later steps'. The load average before and after, since the box may be shared.
Each run leaves up to c sequences unended, holding their slots until the model's idle timeout
(5 s): with accumulator's 16 slots, levels up to 8 leave the next run room for its own.

    python -m bench sequences --levels 1,4 --rounds 3 --sequence-length 20

Writes sequences.json to $OUT or .bench-out/, rewritten after every run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import core_split, out_dir, pin_clients
from bench.tools import Measure, RunAccount, ensure_perf_analyzer, ours_measure, run_perf_analyzer

TOOLS = ("ours", "pa")
NAMES = {"ours": "ours", "pa": "perf_analyzer"}
TRANSPORTS = ("http", "grpc")  # ours load.transport; perf_analyzer -i
PA_IDS = "1000000000:2000000000"  # perf_analyzer's sequence ids (it reads int32): far above our worker 0's


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                epilog="Fits: any box, CPU; about 2 minutes at the defaults (2 tools x 2 levels x 3 rounds).")
    p.add_argument("--model", default="accumulator", help="an embedded sequence model")
    p.add_argument("--variant", default="cpu")
    p.add_argument("--levels", default="1,4", help="concurrency levels (sequences in flight)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sequence-length", type=int, default=20)
    p.add_argument("--window-ms", type=int, default=2000)
    p.add_argument("--stability", type=float, default=1000.0, help="percent (1000: off, exactly --max-windows windows)")
    p.add_argument("--max-windows", type=int, default=3)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--transports", default="http", help="of http, grpc (perf_analyzer -i the same)")
    p.add_argument("--client-cores", type=int, default=0,
                   help="both clients on this many cores of their own, the server on the rest (0: all share every core)")
    return p


async def _ours(url: str, model: str, level: int, args: argparse.Namespace, transport: str) -> Measure:
    from engine.load.sweep import run_sweep
    from engine.profiles import Load
    from engine.triton.api import TritonApi
    from engine.triton.target import Target, describe_target

    target = Target(url, model)
    info = await describe_target(target)
    load = Load(mode="concurrency", concurrency=[level], batch_size=1, window_ms=args.window_ms,
                stability_percent=args.stability, max_windows=args.max_windows, warmup_s=0.0,
                request_timeout_s=30.0, transport=transport, contended_percent=100.0,
                sequence_length=args.sequence_length, sequence_length_variation=0.0)
    with RunAccount(url, model, "engine.load.worker", include_self=True, level=level) as acct:
        (r,) = await run_sweep(TritonApi(target, info), load, lambda e: None, asyncio.Event())
    m = acct.fill(ours_measure(r))
    seq = r.sequence
    if seq is not None:
        m.extra.update(seq_s=seq.sequences_per_s, first_p99_ms=seq.first_step.p99 and seq.first_step.p99 * 1e3,
                       later_p99_ms=seq.later_steps.p99 and seq.later_steps.p99 * 1e3, dropped=seq.dropped)
    return m


def _row(m: Measure, length: int, tool: str) -> dict[str, Any]:
    seq_s = m.extra.get("seq_s") if tool == "ours" else m.extra.get("seq_per_s")
    return {"ok": m.ok, "status": m.status, "infer_s": m.throughput, "seq_s": seq_s, "p50_ms": m.p50_ms,
            "p99_ms": m.p99_ms, "first_p99_ms": m.extra.get("first_p99_ms"), "later_p99_ms": m.extra.get("later_p99_ms"),
            "errors": m.extra.get("errors"), "cpu_us_per_req": m.client_cpu_us_per_request,
            "server_us_per_req": m.server_us_per_request,  # Triton's own request time (its statistics)
            # perf_analyzer's own split of its latency (µs): its client's send and receive
            "client_send_us": m.extra.get("client_send_us"), "client_recv_us": m.extra.get("client_recv_us")}


def _one(tool: str, url: str, level: int, args: argparse.Namespace, pa: Any, transport: str) -> dict[str, Any]:
    if tool == "pa":
        extra = ("--sequence-length", str(args.sequence_length), "--sequence-length-variation", "0",
                 "--sequence-id-range", PA_IDS)
        m = run_perf_analyzer(pa, url, args.model, level, args, extra=extra, protocol=transport)
        row = _row(m, args.sequence_length, tool)
        return row if m.ok else {**row, "output_tail": m.extra.get("output_tail")}
    try:
        return _row(asyncio.run(_ours(url, args.model, level, args, transport)), args.sequence_length, tool)
    except Exception as exc:  # noqa: BLE001 - reported in the row, the bench goes on
        return {"ok": False, "status": f"failed: {type(exc).__name__}: {exc}"[:160]}


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _band(xs: list[float]) -> str:
    return f"{sum(xs) / len(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]" if xs else "not measured"


def _num(x: float | None, fmt: str = "{:,.0f}") -> str:
    return fmt.format(x) if x is not None else "not measured"


def summary(rows: list[dict[str, Any]], levels: list[int], transport: str = "http") -> list[str]:
    """Per level and tool over one transport: infer/s per round, mean, spread, ratio to
    perf_analyzer; seq/s; latency."""
    rows = [r for r in rows if r.get("transport", "http") == transport]
    lines = ["| c | tool | infer/s per round | mean | spread | / perf_analyzer, mean [min-max] | seq/s | "
             "p50 ms | p99 ms | 1st step p99 ms | later p99 ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for level in levels:
        at = [r for r in rows if r["level"] == level]
        rounds = sorted({r["round"] for r in at})

        def got(tool: str, rnd: int, key: str, at: list[dict[str, Any]] = at) -> float | None:
            for r in at:
                if r["round"] == rnd and r["tool"] == tool and r["ok"]:
                    return r.get(key)
            return None

        for tool in TOOLS:
            per = [got(tool, rnd, "infer_s") for rnd in rounds]
            vals = [x for x in per if x is not None]
            ratios = [a / b for rnd in rounds if (a := got(tool, rnd, "infer_s")) and (b := got("pa", rnd, "infer_s"))]
            spread = f"{100 * (max(vals) - min(vals)) / (sum(vals) / len(vals)):.0f} %" if len(vals) > 1 else "n/a"

            def mean_of(key: str, tool: str = tool, rounds: list[int] = rounds) -> float | None:
                return _mean([x for rnd in rounds if (x := got(tool, rnd, key)) is not None])

            lines.append(
                f"| {level} | {NAMES[tool]} ({transport}) | {', '.join(_num(x) for x in per)} | {_num(_mean(vals))} | {spread} | "
                f"{'1 (the anchor)' if tool == 'pa' else _band(ratios)} | {_num(mean_of('seq_s'), '{:,.1f}')} | "
                f"{_num(mean_of('p50_ms'), '{:.2f}')} | {_num(mean_of('p99_ms'), '{:.2f}')} | "
                f"{_num(mean_of('first_p99_ms'), '{:.2f}')} | {_num(mean_of('later_p99_ms'), '{:.2f}')} |")
    return lines


def run(args: argparse.Namespace) -> int:
    from engine.server.embedded import EmbeddedServer

    try:
        levels = [int(x) for x in args.levels.split(",") if x]
    except ValueError as exc:
        print(f"sequences: --levels: {exc}", file=sys.stderr)
        return 2
    transports = [t for t in args.transports.split(",") if t]
    if not transports or any(t not in TRANSPORTS for t in transports):
        print(f"sequences: --transports: each of {', '.join(TRANSPORTS)}", file=sys.stderr)
        return 2
    pa = ensure_perf_analyzer()
    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    out = out_dir() / "sequences.json"
    clients, server_cores = core_split(args.client_cores)
    with tempfile.TemporaryDirectory() as logs, EmbeddedServer(model=args.model, variant=args.variant,
                                                               log_dir=Path(logs), cpus=server_cores) as srv:
        pin_clients(clients, server_cores)
        print(f"== {args.model} on embedded Triton at {srv.http_url}; sequence length {args.sequence_length}; "
              f"load average {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; {os.cpu_count()} CPUs",
              flush=True)
        for transport, level, rnd in itertools.product(transports, levels, range(args.rounds)):
            for tool in TOOLS if rnd % 2 == 0 else tuple(reversed(TOOLS)):
                started = time.monotonic()
                row = {"transport": transport, "level": level, "round": rnd, "tool": tool,
                       **_one(tool, srv.http_url, level, args, pa, transport),
                       "wall_s": round(time.monotonic() - started, 1), "load1": round(os.getloadavg()[0], 2)}
                rows.append(row)
                print(json.dumps(row), flush=True)
                out.write_text(json.dumps({"args": vars(args), "load_before": load_before, "rows": rows}, indent=1))
    load_after = os.getloadavg()
    out.write_text(json.dumps({"args": vars(args), "load_before": load_before, "load_after": load_after, "rows": rows},
                              indent=1))
    print()
    for transport in transports:
        print("\n".join(summary(rows, levels, transport)))
    print(f"\nload average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, after "
          f"{load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} (1, 5, 15 min); {os.cpu_count()} CPUs")
    return 0
