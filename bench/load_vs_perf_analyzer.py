"""Our load engine against perf_analyzer, same server, same model, same batch and windows, one run.

For each model it starts the embedded Triton once, then for each concurrency level runs both
tools alternately (the order flips every level and round) and prints, per level, our throughput
/ theirs, our p50 / theirs and our p99 / theirs, plus what each client cost in CPU. Results go
to bench/out/load_vs_perf_analyzer-<time>.json.

    .venv/bin/python bench/load_vs_perf_analyzer.py                       # identity and vit_tiny, 1/8/32
    .venv/bin/python bench/load_vs_perf_analyzer.py --models identity --levels 8 --rounds 3

Both tools use perf_analyzer's method with the same settings: windows of --window-ms, stable
when 3 windows agree within --stability %, at most --max-windows windows. perf_analyzer gives
no result for a level it cannot stabilise; that shows as "n/a" (and is retried --pa-retries
times). Targets (issue 3): throughput ratio >= 1.0 at every level, p50 within 10 %.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load_pa_setup import SetupError, ensure_perf_analyzer  # noqa: E402
from bench.load_sched import SchedWatcher  # noqa: E402
from engine.events import LevelResult  # noqa: E402
from engine.load.sweep import run_sweep  # noqa: E402
from engine.load.target import Target, describe_target  # noqa: E402
from engine.profiles import Load  # noqa: E402

OUT = ROOT / "bench" / "out"


@dataclass
class Measure:
    tool: str
    ok: bool
    status: str
    throughput: float | None = None  # inferences/s
    p50_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    client_cpu_cores: float | None = None  # client CPU seconds / wall seconds over the whole run
    client_cpu_us_per_request: float | None = None  # client CPU / requests the server served in the run
    client_wait_us_per_request: float | None = None  # client threads' run-queue wait / requests served
    server_us_per_request: float | None = None  # the server's own time per request over the run
    wall_s: float = 0.0
    extra: dict = field(default_factory=dict)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _self_cpu() -> float:
    """CPU of this thread only: the session's event loop runs here, while SchedWatcher's
    sampling thread (bench machinery, not client work) must not be charged to our engine."""
    return time.thread_time()


def server_totals(url: str, model: str) -> tuple[int, int]:
    """The server's cumulative (successful requests, their total ns) for the model."""
    with urllib.request.urlopen(f"{url}/v2/models/{model}/stats", timeout=10) as reply:  # noqa: S310 - loopback
        doc = json.loads(reply.read())
    success = [s["inference_stats"]["success"] for s in doc["model_stats"]]
    return sum(int(x["count"]) for x in success), sum(int(x["ns"]) for x in success)


class RunAccount:
    """What one tool's run cost the client and got from the server, measured the same way for
    both tools: client CPU (rusage of the exited client processes, plus for our engine the
    session's thread, which does its share of the client's work), client run-queue wait
    (schedstat), and the server's request count and time (statistics extension)."""

    def __init__(self, url: str, model: str, match: str, include_self: bool) -> None:
        self.url, self.model, self.include_self = url, model, include_self
        self.watch = SchedWatcher(match)

    def __enter__(self) -> RunAccount:
        self.n0, self.ns0 = server_totals(self.url, self.model)
        self.cpu0, self.self0, self.t0 = _children_cpu(), _self_cpu(), time.monotonic()
        self.watch.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.watch.__exit__()
        self.wall = time.monotonic() - self.t0
        self.cpu = _children_cpu() - self.cpu0 + ((_self_cpu() - self.self0) if self.include_self else 0.0)
        n1, ns1 = server_totals(self.url, self.model)
        self.served, self.server_ns = n1 - self.n0, ns1 - self.ns0

    def fill(self, m: Measure) -> Measure:
        per = (lambda x: x / self.served * 1e6) if self.served else (lambda x: None)  # noqa: E731
        m.client_cpu_cores = self.cpu / self.wall
        m.client_cpu_us_per_request = per(self.cpu)
        m.client_wait_us_per_request = per(self.watch.wait_s)
        m.server_us_per_request = self.server_ns / self.served / 1e3 if self.served else None
        m.wall_s = self.wall
        m.extra["client_threads"] = self.watch.threads
        return m


def run_perf_analyzer(binary: Path, env: dict, url: str, model: str, level: int, args) -> Measure:
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "pa.csv"
        cmd = [
            str(binary), "-m", model, "-u", url.removeprefix("http://"), "-i", "http",
            "--concurrency-range", str(level), "-b", str(args.batch),
            "--measurement-interval", str(args.window_ms), "-s", str(args.stability),
            "-r", str(args.max_windows), "-f", str(csv_path), "--verbose-csv",
            *getattr(args, "pa_extra", []),
        ]
        with RunAccount(url, model, str(binary), include_self=False) as acct:
            run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.window_ms / 1000 * (args.max_windows + 4) + 60)
        if run.returncode != 0 or not csv_path.exists():
            tail = (run.stdout + run.stderr).strip().splitlines()[-1:] or ["?"]
            return acct.fill(Measure("perf_analyzer", False, f"no result: {tail[0][:90]}"))
        rows = list(csv.DictReader(csv_path.open()))
    row = rows[-1]
    return acct.fill(Measure(
        "perf_analyzer", True, "stable",
        throughput=float(row["Inferences/Second"]),
        p50_ms=float(row["p50 latency"]) / 1000, p99_ms=float(row["p99 latency"]) / 1000,
        mean_ms=float(row["Avg latency"]) / 1000,
        extra={
            "server_queue_us": float(row["Server Queue"]), "server_infer_us": float(row["Server Compute Infer"]),
            # perf_analyzer's own split of its latency (us): what its client spent sending and
            # receiving, and the rest (network + server, HTTP front end included)
            **{k: float(row[c]) for k, c in (("client_send_us", "Client Send"), ("network_server_us", "Network+Server Send/Recv"),
                                              ("client_recv_us", "Client Recv"), ("server_input_us", "Server Compute Input"))
               if row.get(c) not in (None, "")},
        },
    ))


async def run_ours(url: str, model: str, level: int, args) -> Measure:
    target = Target(url, model)
    info = await describe_target(target)
    load = Load(
        concurrency=[level], batch_size=args.batch, window_ms=args.window_ms, stability_percent=args.stability,
        max_windows=args.max_windows, warmup_s=0.0, workers=args.workers, request_timeout_s=30.0,
    )
    events: list = []
    with RunAccount(url, model, "engine.load.worker", include_self=True) as acct:
        results = await run_sweep(target, info, load, events.append, asyncio.Event())
    (r,) = results
    return acct.fill(_ours_measure(r))


def _ours_measure(r: LevelResult) -> Measure:
    ok = r.status in ("stable", "unstable") and r.latency.count > 0
    return Measure(
        "ours", ok, r.status,
        throughput=r.throughput_ips if ok else None,
        p50_ms=r.latency.p50 * 1e3 if ok else None,
        p99_ms=r.latency.p99 * 1e3 if ok else None,
        mean_ms=r.latency.mean * 1e3 if ok else None,
        extra={
            "windows": r.windows, "errors": r.errors,
            "worker_cpu_percent": r.audit.cpu_percent, "client_bound": r.audit.client_bound,
            "reasons": r.audit.reasons, "loop_lag_p99_ms": r.audit.loop_lag_p99 and r.audit.loop_lag_p99 * 1e3,
            "server_queue_us": r.server.queue * 1e6 if r.server and r.server.queue is not None else None,
            "server_infer_us": r.server.compute_infer * 1e6 if r.server and r.server.compute_infer is not None else None,
            "avg_batch": r.server.avg_batch_size if r.server else None,
            "client_minus_server_us": r.server.client_minus_server * 1e6 if r.server and r.server.client_minus_server is not None else None,
            "write_p50_us": r.audit.write_p50 and r.audit.write_p50 * 1e6,
            "write_p99_us": r.audit.write_p99 and r.audit.write_p99 * 1e6,
            "first_byte_p50_us": r.audit.first_byte_p50 and r.audit.first_byte_p50 * 1e6,
            "client_delay_p50_us": r.audit.client_delay_p50 and r.audit.client_delay_p50 * 1e6,
            "client_delay_fraction": r.audit.client_delay_fraction,
        },
    )


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt(x: float | None, spec: str) -> str:
    return format(x, spec) if x is not None else "n/a"


def bench_model(model: str, args, binary: Path, env: dict) -> list[dict]:
    from engine.server.embedded import EmbeddedServer

    rows = []
    with tempfile.TemporaryDirectory() as logs, EmbeddedServer(model=model, variant=args.variant, log_dir=Path(logs)) as srv:
        print(f"\n== {model}: embedded Triton at {srv.http_url} (variant {srv.variant}), batch {args.batch}", flush=True)
        for li, level in enumerate(args.levels):
            for rnd in range(args.rounds):
                order = ["pa", "ours"] if (li + rnd) % 2 == 0 else ["ours", "pa"]
                got: dict[str, Measure] = {}
                for tool in order:
                    if tool == "pa":
                        for _ in range(1 + args.pa_retries):
                            m = run_perf_analyzer(binary, env, srv.http_url, model, level, args)
                            if m.ok:
                                break
                        got["pa"] = m
                    else:
                        got["ours"] = asyncio.run(run_ours(srv.http_url, model, level, args))
                ours, pa = got["ours"], got["pa"]
                row = {
                    "model": model, "level": level, "round": rnd, "order": order,
                    "ours": asdict(ours), "perf_analyzer": asdict(pa),
                    "throughput_ratio": _ratio(ours.throughput, pa.throughput),
                    "p50_ratio": _ratio(ours.p50_ms, pa.p50_ms),
                    "p99_ratio": _ratio(ours.p99_ms, pa.p99_ms),
                }
                rows.append(row)
                print(
                    f"  c={level:<3} r{rnd}  thr {_fmt(ours.throughput, '8.1f')} / {_fmt(pa.throughput, '8.1f')} = {_fmt(row['throughput_ratio'], '5.2f')}"
                    f"   p50 {_fmt(ours.p50_ms, '7.3f')} / {_fmt(pa.p50_ms, '7.3f')} ms = {_fmt(row['p50_ratio'], '5.2f')}"
                    f"   p99 {_fmt(ours.p99_ms, '7.3f')} / {_fmt(pa.p99_ms, '7.3f')} ms = {_fmt(row['p99_ratio'], '5.2f')}"
                    f"   per request: client cpu {_fmt(ours.client_cpu_us_per_request, '.0f')} / {_fmt(pa.client_cpu_us_per_request, '.0f')} us,"
                    f" client run-queue wait {_fmt(ours.client_wait_us_per_request, '.0f')} / {_fmt(pa.client_wait_us_per_request, '.0f')} us,"
                    f" server {_fmt(ours.server_us_per_request, '.0f')} / {_fmt(pa.server_us_per_request, '.0f')} us"
                    f"   [{ours.status}; pa {pa.status}]",
                    flush=True,
                )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="identity,vit_tiny")
    parser.add_argument("--levels", default="1,8,32")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--window-ms", type=int, default=2000)
    parser.add_argument("--stability", type=float, default=10.0)
    parser.add_argument("--max-windows", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workers", type=int, default=0, help="our load workers (0 = automatic)")
    parser.add_argument("--pa-retries", type=int, default=1)
    parser.add_argument("--variant", default="cpu")
    args = parser.parse_args()
    args.levels = [int(x) for x in args.levels.split(",")]
    try:
        binary, env = ensure_perf_analyzer()
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = time.strftime("%Y%m%d-%H%M%S")
    rows = []
    for model in args.models.split(","):
        rows += bench_model(model, args, binary, env)
    print("\nsummary (ours / perf_analyzer; ratios: mean [min-max] over rounds with both results;"
          " spread: each tool's (max - min) / mean throughput over its rounds):")
    print(f"  {'model':<18}{'conc':>5}{'thr ratio':>20}{'p50 ratio':>20}{'p99 ratio':>20}{'ours spread':>13}{'pa spread':>11}{'ours thr':>10}{'pa thr':>9}")
    for model in args.models.split(","):
        for level in args.levels:
            sel = [r for r in rows if r["model"] == model and r["level"] == level and r["throughput_ratio"]]
            if not sel:
                print(f"  {model:<18}{level:>5}{'n/a':>20}{'n/a':>20}{'n/a':>20}")
                continue

            def band(key: str, sel: list = sel) -> str:
                xs = [r[key] for r in sel if r[key] is not None]
                return f"{sum(xs) / len(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]" if xs else "n/a"

            def spread(tool: str, model: str = model, level: int = level) -> tuple[str, float]:
                xs = [r[tool]["throughput"] for r in rows if r["model"] == model and r["level"] == level and r[tool]["throughput"]]
                if len(xs) < 2:
                    return "n/a", (xs[0] if xs else 0.0)
                mean = sum(xs) / len(xs)
                return f"{100 * (max(xs) - min(xs)) / mean:.1f} %", mean

            (os_, om), (ps, pm) = spread("ours"), spread("perf_analyzer")
            print(f"  {model:<18}{level:>5}{band('throughput_ratio'):>20}{band('p50_ratio'):>20}{band('p99_ratio'):>20}{os_:>13}{ps:>11}{om:>10.0f}{pm:>9.0f}")
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"load_vs_perf_analyzer-{started}.json"
    path.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    print(f"\nwritten: {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
