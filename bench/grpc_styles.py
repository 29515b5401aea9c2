"""gRPC client styles against perf_analyzer `-i grpc`: what each adds to a request's latency and
what it costs in client CPU, on the identity model of an embedded server.

Styles, each with one channel (one TCP connection) per in-flight call, as the grpc transport
opens them, sending the same serialised ModelInferRequest:
  aio      grpc.aio, one asyncio loop (today's transport);
  future   the sync API's ``future()`` with a done-callback that sends the next call;
  threads  blocking sync calls, one thread per channel.
perf_analyzer 2.41 `-i grpc` runs the same concurrency, in alternating rounds with them. Per
style: calls/s, latency p50 / p99, and client CPU per call (this process's CPU over the run,
every grpc thread included); perf_analyzer's own client send + receive per call from its CSV.

    python -m bench grpc_styles --levels 1,16 --rounds 3 --seconds 5

Writes grpc_styles.json to $OUT or .bench-out/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from bench.common import out_dir

STYLES = ("aio", "future", "threads")
METHOD = "/inference.GRPCInferenceService/ModelInfer"
OPTIONS = (("grpc.use_local_subchannel_pool", 1), ("grpc.enable_retries", 0))


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                epilog="Fits: any box, CPU variant; a few minutes.")
    p.add_argument("--levels", default="1,16")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=5.0, help="each style's run at each level")
    p.add_argument("--styles", default=",".join(STYLES))
    p.add_argument("--no-perf-analyzer", action="store_true")
    return p


def _request(http_url: str, model: str) -> bytes:
    from engine.triton.transports.grpc import messages

    with urllib.request.urlopen(f"{http_url}/v2/models/{model}", timeout=10) as r:
        meta = json.load(r)
    pb = messages()
    req = pb.ModelInferRequest(model_name=model)
    raw = []
    for spec in meta["inputs"]:
        shape = [1 if d < 0 else d for d in spec["shape"]]
        count = 1
        for d in shape:
            count *= d
        tensor = req.inputs.add(name=spec["name"], datatype=spec["datatype"])
        tensor.shape.extend(shape)
        raw.append(b"\0" * (count * 4))
    req.raw_input_contents.extend(raw)
    return bytes(req.SerializeToString())


def _aio(address: str, body: bytes, level: int, seconds: float) -> list[float]:
    import grpc

    async def main() -> list[float]:
        channels = [grpc.aio.insecure_channel(address, options=OPTIONS) for _ in range(level)]
        calls = [c.unary_unary(METHOD, request_serializer=None, response_deserializer=None) for c in channels]
        lat: list[float] = []
        end = time.monotonic() + seconds

        async def one(call: Any) -> None:
            while time.monotonic() < end:
                t = time.monotonic_ns()
                await call(body)
                lat.append((time.monotonic_ns() - t) / 1e9)
        for call in calls:  # a first call each, unmeasured: the connection
            await call(body)
        await asyncio.gather(*(one(c) for c in calls))
        for c in channels:
            await c.close()
        return lat
    return asyncio.run(main())


def _future(address: str, body: bytes, level: int, seconds: float) -> list[float]:
    import grpc

    channels = [grpc.insecure_channel(address, options=OPTIONS) for _ in range(level)]
    calls = [c.unary_unary(METHOD, request_serializer=None, response_deserializer=None) for c in channels]
    for call in calls:
        call(body)
    lat: list[float] = []
    lock = threading.Lock()
    end = time.monotonic() + seconds
    live = [level]
    done = threading.Event()

    def send(call: Any) -> None:
        t = time.monotonic_ns()

        def finished(f: Any) -> None:
            f.result()
            with lock:
                lat.append((time.monotonic_ns() - t) / 1e9)
            if time.monotonic() < end:
                send(call)
            else:
                with lock:
                    live[0] -= 1
                    if not live[0]:
                        done.set()
        call.future(body).add_done_callback(finished)
    for call in calls:
        send(call)
    done.wait(seconds + 30)
    for c in channels:
        c.close()
    return lat


def _threads(address: str, body: bytes, level: int, seconds: float) -> list[float]:
    import grpc

    channels = [grpc.insecure_channel(address, options=OPTIONS) for _ in range(level)]
    calls = [c.unary_unary(METHOD, request_serializer=None, response_deserializer=None) for c in channels]
    for call in calls:
        call(body)
    per: list[list[float]] = [[] for _ in calls]
    end = time.monotonic() + seconds

    def loop(call: Any, out: list[float]) -> None:
        while time.monotonic() < end:
            t = time.monotonic_ns()
            call(body)
            out.append((time.monotonic_ns() - t) / 1e9)
    threads = [threading.Thread(target=loop, args=(c, o)) for c, o in zip(calls, per, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in channels:
        c.close()
    return [x for o in per for x in o]


RUNNERS: dict[str, Callable[[str, bytes, int, float], list[float]]] = {"aio": _aio, "future": _future, "threads": _threads}


def _ours(style: str, address: str, body: bytes, level: int, seconds: float) -> dict[str, Any]:
    cpu0, t0 = time.process_time(), time.monotonic()
    lat = RUNNERS[style](address, body, level, seconds)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
    lat.sort()
    n = len(lat)
    return {"tool": style, "level": level, "calls_s": n / seconds, "p50_ms": lat[n // 2] * 1e3 if n else None,
            "p99_ms": lat[min(n - 1, int(n * 0.99))] * 1e3 if n else None,
            "cpu_us_per_call": cpu / max(1, n + level) * 1e6, "wall_s": wall}


def _pa(pa: Any, http_url: str, level: int, seconds: float) -> dict[str, Any]:
    from bench.tools import run_perf_analyzer

    args = argparse.Namespace(batch=1, window_ms=int(seconds * 1000), stability=1000, max_windows=3)
    m = run_perf_analyzer(pa, http_url, "identity", level, args, protocol="grpc")
    extra = m.extra
    return {"tool": "perf_analyzer", "level": level, "calls_s": m.throughput, "p50_ms": m.p50_ms, "p99_ms": m.p99_ms,
            "client_send_recv_us": (extra.get("client_send_us") or 0) + (extra.get("client_recv_us") or 0)
            if m.ok else None, "ok": m.ok}


def run(args: argparse.Namespace) -> int:
    from engine.server.embedded import EmbeddedServer

    levels = [int(x) for x in args.levels.split(",")]
    styles = [s for s in args.styles.split(",") if s]
    if any(s not in RUNNERS for s in styles):
        print(f"grpc_styles: --styles: each one of {', '.join(STYLES)}", file=sys.stderr)
        return 2
    pa = None
    if not args.no_perf_analyzer:
        from bench.tools import ensure_perf_analyzer

        pa = ensure_perf_analyzer()
    rows: list[dict[str, Any]] = []
    with EmbeddedServer(model="identity", variant="cpu") as srv:
        from engine.triton.target import Target
        from engine.triton.transports.grpc import grpc_address

        address = grpc_address(Target(srv.http_url, "identity"))[0]
        body = _request(srv.http_url, "identity")
        for level in levels:
            for r in range(args.rounds):
                order = [*styles, "pa"] if r % 2 == 0 else ["pa", *reversed(styles)]
                for tool in order:
                    if tool == "pa":
                        if pa is not None:
                            rows.append({**_pa(pa, srv.http_url, level, args.seconds), "round": r})
                    else:
                        rows.append({**_ours(tool, address, body, level, args.seconds), "round": r})
                    print(json.dumps(rows[-1]), flush=True)
    (out_dir() / "grpc_styles.json").write_text(json.dumps(rows, indent=1))
    print("\n| level | tool | calls/s (median of rounds) | p50 ms | p99 ms | client CPU µs/call | pa client send+recv µs |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for level in levels:
        for tool in [*styles, "perf_analyzer"]:
            mine = [x for x in rows if x["level"] == level and x["tool"] == tool and x.get("calls_s")]
            if not mine:
                continue

            def med(key: str, rows_: list[dict[str, Any]] = mine) -> str:
                vals = [x[key] for x in rows_ if x.get(key) is not None]
                return f"{statistics.median(vals):,.2f}" if vals else "-"
            print(f"| {level} | {tool} | {med('calls_s')} | {med('p50_ms')} | {med('p99_ms')} | "
                  f"{med('cpu_us_per_call')} | {med('client_send_recv_us')} |")
    return 0
