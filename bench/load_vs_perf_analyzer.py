"""Our load engine against perf_analyzer, same server, same model, same batch and windows, one run.

For each model it starts the embedded Triton once, then for each concurrency level runs both
tools alternately (the order flips every level and round) and prints, per level, our throughput
/ theirs, our p50 / theirs and our p99 / theirs, plus what each client cost in CPU per request.
With --rates-of-peak it then takes the peak (the best concurrency level's mean throughput in
this run, perf_analyzer's unless --peak-from says otherwise) and runs both tools open-loop at
those fractions of it: ours in rate mode, perf_analyzer with --request-rate-range (both constant
arrival). Ours is reported corrected for coordinated omission (latency from each request's
intended send time) and uncorrected (from its actual send, perf_analyzer's way), beside our
late-send share and our side's share of the latency, and perf_analyzer's own overhead figure
and its "not able to keep up" warning. A summary table per mode ends the run; the JSON goes to
$OUT if set, else bench/out/ (rewritten after every level, so a cut-off run keeps its rows).

    .venv/bin/python bench/load_vs_perf_analyzer.py                       # identity and vit_tiny, 1/8/32
    .venv/bin/python bench/load_vs_perf_analyzer.py --models identity --levels 8 --rounds 3
    .venv/bin/python bench/load_vs_perf_analyzer.py --models identity --levels 4 --rates-of-peak 0.5 --window-ms 500
    .venv/bin/python bench/load_vs_perf_analyzer.py ... --estimate        # the plan and its duration only

Both tools use perf_analyzer's method with the same settings: windows of --window-ms, stable
when 3 windows agree within --stability %, at most --max-windows windows. perf_analyzer gives
no result for a level it cannot stabilise (or cannot run, e.g. 512 threads): that shows as "n/a"
with its error line (and is retried --pa-retries times); the bench goes on. --budget-s starts no
pair of runs that would end past it (exit 1 then: incomplete); SIGTERM stops it with the summary
of what was measured (exit 130). Targets (issue 13): throughput ratio in [0.95, 1.05] unless
perf_analyzer's client is the limit, p50 within 10 %, our spread <= 5 %.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load_pa_setup import SetupError, ensure_perf_analyzer  # noqa: E402
from bench.load_sched import SchedWatcher  # noqa: E402
from engine.events import LevelResult  # noqa: E402
from engine.http_threads import SpreadWatch, listener_pid  # noqa: E402
from engine.load.http1 import parse_endpoint  # noqa: E402
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
    # rate mode, ours: latency from the actual send (our p50_ms/p99_ms are then from the
    # intended send time, corrected for coordinated omission); perf_analyzer measures this way
    p50_uncorrected_ms: float | None = None
    p99_uncorrected_ms: float | None = None
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

    def __init__(self, url: str, model: str, match: str, include_self: bool, level: int = 0) -> None:
        self.url, self.model, self.include_self = url, model, include_self
        self.watch = SchedWatcher(match)
        self.spread = FrontendSampler(url, level)

    def __enter__(self) -> RunAccount:
        self.spread.start()
        self.n0, self.ns0 = server_totals(self.url, self.model)
        self.cpu0, self.self0, self.t0 = _children_cpu(), _self_cpu(), time.monotonic()
        self.watch.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.watch.__exit__()
        self.spread.stop.set()
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
        self.spread.join()
        if self.spread.per_thread:
            m.extra["frontend"] = self.spread.per_thread
        return m


class FrontendSampler(threading.Thread):
    """Which of the (local) server's HTTP threads hold the tool's connections during a run
    (engine/http_threads.py): the same reading for both tools, so a difference in throughput can be
    set beside a difference in spread. ``level``: pictures with more connections than that
    (plus the statistics poller's) are our engine's spares, opened and closed before T0."""

    def __init__(self, url: str, level: int) -> None:
        super().__init__(daemon=True)
        self.url, self.level = url, level
        self.stop = threading.Event()
        self.per_thread: list[int] = []

    def run(self) -> None:
        endpoint = parse_endpoint(self.url)
        pid = listener_pid(endpoint.port)
        if pid is None:
            return
        watch = SpreadWatch(pid, endpoint.port, most=self.level + 2 if self.level else 0)
        while not self.stop.wait(0.2):
            watch.sample()
        self.per_thread = watch.per_thread()


def spread_text(per_thread: list[int] | None) -> str:
    """'busiest/threads used', e.g. '4/32' (n/a without a reading)."""
    return f"{per_thread[0]}/{len(per_thread)}" if per_thread else "n/a"


PA_FIGURES = {
    # perf_analyzer's own view of its client (printed with -v); absent when it does not print them
    "overhead_pct": re.compile(r"Avg client overhead:\s*([\d.]+)\s*%"),
    "send_rate": re.compile(r"Avg send request rate:\s*([\d.]+)"),
    "delayed_pct": re.compile(r"([\d.]+)\s*% of the requests were delayed"),
}


def pa_client_figures(text: str) -> dict:
    """perf_analyzer's statements about its own client: its overhead figure, the send rate it
    achieved, the share of requests it sent late, and any warning lines, verbatim."""
    got: dict = {}
    for key, pattern in PA_FIGURES.items():
        found = pattern.findall(text)
        if found:
            got[key] = float(found[-1])
    warnings = list(dict.fromkeys(line.strip() for line in text.splitlines() if "WARNING" in line.upper()))
    if warnings:
        got["warnings"] = warnings
    return got


def pa_error_line(text: str) -> str:
    """The line that says why perf_analyzer gave no result: the first error/failure line, else
    its last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        low = line.lower()
        if any(w in low for w in ("error", "failed", "unable", "cannot", "can't", "resource", "abort", "terminate")):
            return line[:160]
    return lines[-1][:160] if lines else "no output"


def run_perf_analyzer(
    binary: Path, env: dict, url: str, model: str, level: float, args, mode: str = "concurrency", extra: tuple[str, ...] = ()
) -> Measure:
    """One perf_analyzer run at one level: a concurrency, or (mode "rate") a request rate per
    second with its default constant arrival. -v makes it print its own client overhead."""
    load = ["--concurrency-range", str(int(level))] if mode == "concurrency" else ["--request-rate-range", f"{level:.2f}"]
    limit_s = args.window_ms / 1000 * (args.max_windows + 4) + 60
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "pa.csv"
        cmd = [
            str(binary), "-m", model, "-u", url.removeprefix("http://"), "-i", "http", *load, "-b", str(args.batch),
            "--measurement-interval", str(args.window_ms), "-s", str(args.stability),
            "-r", str(args.max_windows), "-f", str(csv_path), "--verbose-csv", "-v",
            *extra, *getattr(args, "pa_extra", []),
        ]
        with RunAccount(url, model, str(binary), include_self=False, level=int(level) if mode == "concurrency" else 0) as acct:
            try:
                run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=limit_s, check=False)
                text, code = run.stdout + run.stderr, run.returncode
            except subprocess.TimeoutExpired as exc:
                text, code = f"timed out after {limit_s:.0f} s", None
                text += "\n" + "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (exc.stdout, exc.stderr))
            except OSError as exc:
                text, code = f"could not start: {exc}", None
        figures = pa_client_figures(text)
        if code != 0 or not csv_path.exists():
            why = f"timed out after {limit_s:.0f} s" if code is None and text.startswith("timed out") else pa_error_line(text)
            m = acct.fill(Measure("perf_analyzer", False, f"no result (exit {code}): {why}"))
            m.extra.update(figures)
            m.extra["output_tail"] = text.strip().splitlines()[-6:]
            return m
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
            **figures,
        },
    ))


async def run_ours(url: str, model: str, level: float, args, mode: str = "concurrency") -> Measure:
    target = Target(url, model)
    info = await describe_target(target)
    common = {
        "batch_size": args.batch, "window_ms": args.window_ms, "stability_percent": args.stability,
        "max_windows": args.max_windows, "warmup_s": 0.0, "workers": args.workers, "request_timeout_s": 30.0,
    }
    if mode == "concurrency":
        load = Load(mode="concurrency", concurrency=[int(level)], **common)
    else:  # constant arrival, as perf_analyzer's --request-rate-range by default
        load = Load(mode="rate", rates=[level], arrival="constant", **common)
    events: list = []
    with RunAccount(url, model, "engine.load.worker", include_self=True, level=int(level) if mode == "concurrency" else 0) as acct:
        results = await run_sweep(target, info, load, events.append, asyncio.Event())
    (r,) = results
    return acct.fill(_ours_measure(r))


class Stopped(BaseException):
    """SIGTERM (e.g. from `timeout`): stop, keep what was measured, print the summary."""


def measure_ours(url: str, model: str, level: float, args, mode: str) -> Measure:
    """Our engine at one level; a failure becomes a failed Measure with its reason, so that one
    level (say 512 connections) cannot end the whole comparison."""
    started = time.monotonic()
    try:
        return asyncio.run(run_ours(url, model, level, args, mode))
    except Exception as exc:  # noqa: BLE001 - reported in the row, the bench goes on
        m = Measure("ours", False, f"failed: {type(exc).__name__}: {exc}"[:160])
        m.wall_s = time.monotonic() - started
        return m


def _ms(x: float | None) -> float | None:
    return x * 1e3 if x is not None else None


def _ours_measure(r: LevelResult) -> Measure:
    ok = r.status in ("stable", "unstable") and r.latency.count > 0
    unc = r.latency_uncorrected if ok else None
    return Measure(
        "ours", ok, r.status,
        throughput=r.throughput_ips if ok else None,
        p50_ms=r.latency.p50 * 1e3 if ok else None,
        p99_ms=r.latency.p99 * 1e3 if ok else None,
        mean_ms=r.latency.mean * 1e3 if ok else None,
        p50_uncorrected_ms=_ms(unc.p50) if unc else None,
        p99_uncorrected_ms=_ms(unc.p99) if unc else None,
        extra={
            "windows": r.windows, "errors": r.errors, "target_rate": r.target_rate,
            "worker_cpu_percent": r.audit.cpu_percent, "client_bound": r.audit.client_bound,
            "reasons": r.audit.reasons, "loop_lag_p99_ms": r.audit.loop_lag_p99 and r.audit.loop_lag_p99 * 1e3,
            "late_sends": r.audit.late_sends, "sent": r.audit.sent,
            "late_share": r.audit.late_sends / r.audit.sent if r.audit.sent else None,
            "server_queue_us": r.server.queue * 1e6 if r.server and r.server.queue is not None else None,
            "server_infer_us": r.server.compute_infer * 1e6 if r.server and r.server.compute_infer is not None else None,
            # the backend's own work around the model: preparing inputs, and handling outputs and responses
            "server_input_us": r.server.compute_input * 1e6 if r.server and r.server.compute_input is not None else None,
            "server_output_us": r.server.compute_output * 1e6 if r.server and r.server.compute_output is not None else None,
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


def _pct(x: float | None, spec: str = ".1f") -> str:
    return f"{format(100 * x, spec)} %" if x is not None else "n/a"


class Budget:
    """A time limit for the whole bench (--budget-s): a run is not started when it would end
    past the limit, so a wrapper's `timeout` never has to cut one off (the summary and the
    JSON then still come). A run's expected length: the mean wall time of the same tool's runs
    in this mode so far, else every window plus a start-up allowance."""

    def __init__(self, budget_s: float, args) -> None:
        self.deadline = time.monotonic() + budget_s if budget_s > 0 else None
        self.default_s = args.window_ms / 1000 * args.max_windows + args.run_overhead_s
        self.walls: dict[tuple[str, str], list[float]] = {}
        self.skipped = 0

    def expect(self, tool: str, mode: str) -> float:
        seen = self.walls.get((tool, mode))
        return sum(seen) / len(seen) if seen else self.default_s

    def allows_pair(self, mode: str) -> bool:
        """Whether both tools' runs at one level fit before the deadline."""
        if self.deadline is None:
            return True
        if time.monotonic() + self.expect("pa", mode) + self.expect("ours", mode) <= self.deadline:
            return True
        self.skipped += 1
        return False

    def ran(self, tool: str, mode: str, m: Measure) -> None:
        self.walls.setdefault((tool, mode), []).append(m.wall_s)


def run_pair(
    model: str, mode: str, level: float, rnd: int, flip: int, url: str, args, binary: Path, env: dict, budget: Budget,
    pa_extra: tuple[str, ...] = (),
) -> dict | None:
    """Both tools at one level, in an order that flips every level and round. None when the
    budget leaves no time for both."""
    order = ["pa", "ours"] if flip % 2 == 0 else ["ours", "pa"]
    if not budget.allows_pair(mode):
        return None
    got: dict[str, Measure] = {}
    for tool in order:
        if tool == "pa":
            for _ in range(1 + args.pa_retries):
                m = run_perf_analyzer(binary, env, url, model, level, args, mode, pa_extra)
                budget.ran("pa", mode, m)
                if m.ok:
                    break
            got["pa"] = m
        else:
            got["ours"] = measure_ours(url, model, level, args, mode)
            budget.ran("ours", mode, got["ours"])
    ours, pa = got["ours"], got["pa"]
    row = {
        "model": model, "mode": mode, "level": level, "round": rnd, "order": order,
        "ours": asdict(ours), "perf_analyzer": asdict(pa),
        "throughput_ratio": _ratio(ours.throughput, pa.throughput),
        "p50_ratio": _ratio(ours.p50_ms, pa.p50_ms),
        "p99_ratio": _ratio(ours.p99_ms, pa.p99_ms),
    }
    if mode == "rate":
        row["p50_uncorrected_ratio"] = _ratio(ours.p50_uncorrected_ms, pa.p50_ms)
        row["p99_uncorrected_ratio"] = _ratio(ours.p99_uncorrected_ms, pa.p99_ms)
    return row


def print_row(row: dict) -> None:
    o, p = row["ours"], row["perf_analyzer"]
    head = f"c={row['level']:<4g}" if row["mode"] == "concurrency" else f"rate {row['level']:.0f}/s ({100 * row['fraction']:.0f} % of peak)"
    print(
        f"  {head} r{row['round']}  thr {_fmt(o['throughput'], '8.1f')} / {_fmt(p['throughput'], '8.1f')} = {_fmt(row['throughput_ratio'], '5.2f')}"
        f"   p50 {_fmt(o['p50_ms'], '7.3f')} / {_fmt(p['p50_ms'], '7.3f')} ms = {_fmt(row['p50_ratio'], '5.2f')}"
        f"   p99 {_fmt(o['p99_ms'], '7.3f')} / {_fmt(p['p99_ms'], '7.3f')} ms = {_fmt(row['p99_ratio'], '5.2f')}",
        flush=True,
    )
    if row["mode"] == "rate":
        oe, pe = o["extra"], p["extra"]
        print(
            f"      uncorrected (from the actual send): p50 {_fmt(o['p50_uncorrected_ms'], '7.3f')} ms = {_fmt(row['p50_uncorrected_ratio'], '5.2f')}"
            f"   p99 {_fmt(o['p99_uncorrected_ms'], '7.3f')} ms = {_fmt(row['p99_uncorrected_ratio'], '5.2f')}"
            f"   ours: late sends {_pct(oe.get('late_share'), '.2f')}, our side {_pct(oe.get('client_delay_fraction'))} of latency"
            f"   pa: overhead {_fmt(pe.get('overhead_pct'), '.2f')} %, sent {_fmt(pe.get('send_rate'), '.0f')}/s, delayed {_fmt(pe.get('delayed_pct'), '.1f')} %",
            flush=True,
        )
    print(
        f"      per request: client cpu {_fmt(o['client_cpu_us_per_request'], '.0f')} / {_fmt(p['client_cpu_us_per_request'], '.0f')} us,"
        f" client run-queue wait {_fmt(o['client_wait_us_per_request'], '.0f')} / {_fmt(p['client_wait_us_per_request'], '.0f')} us,"
        f" server {_fmt(o['server_us_per_request'], '.0f')} / {_fmt(p['server_us_per_request'], '.0f')} us,"
        f" busiest HTTP thread/threads used {spread_text(o['extra'].get('frontend'))} / {spread_text(p['extra'].get('frontend'))}"
        f"   [ours {o['status']}{' CLIENT-BOUND' if o['extra'].get('client_bound') else ''}; pa {p['status']}]",
        flush=True,
    )
    for w in p["extra"].get("warnings", []):
        print(f"      perf_analyzer: {w}", flush=True)


def find_peak(rows: list[dict], model: str, source: str) -> tuple[float, float, str] | None:
    """The peak throughput of this model's concurrency levels in this run: the best level's
    mean over rounds, from perf_analyzer ("pa"), ours ("ours") or whichever is higher ("max");
    "pa" and "ours" fall back to the other tool when the first has no result."""
    best: dict[str, tuple[float, float, int]] = {}
    for tool in ("perf_analyzer", "ours"):
        by_level: dict[float, list[float]] = {}
        for r in rows:
            if r["model"] == model and r["mode"] == "concurrency" and r[tool]["throughput"]:
                by_level.setdefault(r["level"], []).append(r[tool]["throughput"])
        if by_level:
            level, xs = max(by_level.items(), key=lambda kv: sum(kv[1]) / len(kv[1]))
            best[tool] = (sum(xs) / len(xs), level, len(xs))
    if not best:
        return None
    if source == "max":
        tool = max(best, key=lambda t: best[t][0])
    else:
        first = "perf_analyzer" if source == "pa" else "ours"
        tool = first if first in best else next(iter(best))
    thr, level, n = best[tool]
    who = "perf_analyzer" if tool == "perf_analyzer" else "our engine"
    fallback = source != "max" and tool != ("perf_analyzer" if source == "pa" else "ours")
    return thr, level, (f"the best concurrency level by {who}: {thr:,.0f} infer/s at c={level:g} (mean of {n} round{'s' * (n > 1)})"
                 + (" - the other tool gave no result at any level" if fallback else ""))


def bench_model(model: str, args, binary: Path, env: dict, budget: Budget, rows: list[dict], save) -> None:
    from engine.server.embedded import EmbeddedServer

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as logs, EmbeddedServer(model=model, variant=args.variant, log_dir=Path(logs)) as srv:
        print(f"\n== {model}: embedded Triton at {srv.http_url} (variant {srv.variant}), batch {args.batch}, ready in {time.monotonic() - t0:.0f} s", flush=True)
        flip = 0
        for level in args.levels:
            for rnd in range(args.rounds):
                row = run_pair(model, "concurrency", level, rnd, flip, srv.http_url, args, binary, env, budget)
                flip += 1
                if row is None:
                    continue
                rows.append(row)
                print_row(row)
                save()
            flip += 1 - args.rounds % 2  # the next level starts with the other tool
        if not args.rates_of_peak:
            return
        if args.peak:
            peak, peak_level, how = args.peak, max(args.levels, default=64), f"given (--peak {args.peak:g})"
        else:
            found = find_peak(rows, model, args.peak_from)
            if found is None:
                print(f"  rate mode skipped: no concurrency level of {model} gave a throughput to take the peak from", flush=True)
                return
            peak, peak_level, how = found
        # perf_analyzer's rate mode sends synchronously from --max-threads threads (default 4),
        # one request in flight per thread: 4 threads cap it at 4 / latency requests/s, far
        # below a GPU server's rates. The peak's concurrency is enough threads for any fraction
        # of the peak (in flight = rate x latency, both lower than at the peak). More than 256
        # overload its own client: with 512 on a 32-core box each request waited 0.4-6.5 ms for
        # a CPU and it could not keep up at 75 % (docs/results/rate_mode_connections_h200.md,
        # call 3), where 256 waited 48-133 us (call 4).
        threads = args.pa_rate_threads or min(256, max(16, int(peak_level)))
        print(f"\n  rate mode (constant arrival): peak {peak:,.0f} infer/s, {how}; perf_analyzer --max-threads {threads}", flush=True)
        args.peaks[model] = {"infer_per_s": peak, "from": how, "pa_max_threads": threads}
        for fraction in args.rates_of_peak:
            rate = fraction * peak / args.batch  # requests/s, both tools
            for rnd in range(args.rounds):
                row = run_pair(model, "rate", rate, rnd, flip, srv.http_url, args, binary, env, budget, ("--max-threads", str(threads)))
                flip += 1
                if row is None:
                    continue
                row["fraction"] = fraction
                rows.append(row)
                print_row(row)
                save()
            flip += 1 - args.rounds % 2


# --------------------------------------------------------------------------- summary


def _band(xs: list[float]) -> str:
    return f"{sum(xs) / len(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]" if xs else "n/a"


def _spread(xs: list[float]) -> str:
    """(max - min) / mean over rounds: a tool's round-to-round spread."""
    if len(xs) < 2:
        return "n/a"
    return f"{100 * (max(xs) - min(xs)) / (sum(xs) / len(xs)):.1f} %"


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _vals(sel: list[dict], *path: str) -> list[float]:
    out = []
    for r in sel:
        x = r
        for key in path:
            x = x.get(key) if isinstance(x, dict) else None
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            out.append(float(x))
    return out


def _failures(sel: list[dict]) -> str:
    notes = []
    for tool, name in (("ours", "ours"), ("perf_analyzer", "pa")):
        bad = [r[tool]["status"] for r in sel if not r[tool]["ok"]]
        if bad:
            notes.append(f"{name} {len(bad)}/{len(sel)} without result: {bad[0]}")
    return "; ".join(notes)


def _cells(rows: list[dict], models: list[str], key: str, values: list) -> Iterator[tuple[str, Any, list[dict]]]:
    """(model, value, its rows) for each model and level (or rate fraction) that has any."""
    for model in models:
        for value in values:
            sel = [r for r in rows if r["model"] == model and r[key] == value]
            if sel:
                yield model, value, sel


def print_summary(rows: list[dict], args) -> None:
    models = args.models.split(",")
    conc = [r for r in rows if r["mode"] == "concurrency"]
    rate = [r for r in rows if r["mode"] == "rate"]
    print("\nsummary, ours / perf_analyzer. Ratios: mean [min-max] over the rounds where both gave a result."
          " Spread: a tool's (max - min) / mean over its rounds.")
    if conc:
        print("\nconcurrency mode: ratios")
        print(f"  {'model':<18}{'c':>5}{'thr ratio':>20}{'p50 ratio':>20}{'p99 ratio':>20}{'rounds':>8}")
        for model, level, sel in _cells(conc, models, "level", args.levels):
            both = [r for r in sel if r["throughput_ratio"] is not None]
            print(f"  {model:<18}{level:>5}{_band(_vals(both, 'throughput_ratio')):>20}{_band(_vals(both, 'p50_ratio')):>20}"
                  f"{_band(_vals(both, 'p99_ratio')):>20}{len(both):>5}/{len(sel)}")
        print("\nconcurrency mode: each client (ours | perf_analyzer)")
        print(f"  {'model':<18}{'c':>5}{'infer/s':>18}{'thr spread':>18}{'p50 spread':>18}{'cpu us/req':>14}{'wait us/req':>14}"
              f"{'our side':>10}{'pa ovh':>8}  notes")
        for model, level, sel in _cells(conc, models, "level", args.levels):
            thr = {t: _vals(sel, t, "throughput") for t in ("ours", "perf_analyzer")}
            p50 = {t: _vals(sel, t, "p50_ms") for t in ("ours", "perf_analyzer")}
            cpu = {t: _mean(_vals(sel, t, "client_cpu_us_per_request")) for t in ("ours", "perf_analyzer")}
            wait = {t: _mean(_vals(sel, t, "client_wait_us_per_request")) for t in ("ours", "perf_analyzer")}
            side = _mean(_vals(sel, "ours", "extra", "client_delay_fraction"))
            ovh = _mean(_vals(sel, "perf_analyzer", "extra", "overhead_pct"))
            bound = sum(bool(r["ours"]["extra"].get("client_bound")) for r in sel)
            notes = "; ".join(x for x in (f"ours client-bound {bound}/{len(sel)}" if bound else "", _failures(sel)) if x)
            print(f"  {model:<18}{level:>5}{_fmt(_mean(thr['ours']), '8.0f'):>9} |{_fmt(_mean(thr['perf_analyzer']), '7.0f'):>7}"
                  f"{_spread(thr['ours']):>9} |{_spread(thr['perf_analyzer']):>7}{_spread(p50['ours']):>9} |{_spread(p50['perf_analyzer']):>7}"
                  f"{_fmt(cpu['ours'], '.0f'):>7} |{_fmt(cpu['perf_analyzer'], '.0f'):>5}{_fmt(wait['ours'], '.0f'):>7} |{_fmt(wait['perf_analyzer'], '.0f'):>5}"
                  f"{_pct(side, '.0f'):>10}{_fmt(ovh, '.1f') + ' %' if ovh is not None else 'n/a':>8}  {notes}")
    if rate:
        print("\nrate mode (constant arrival): ratios; ours corrected = from the intended send time, uncorrected = from the actual send (perf_analyzer's way)")
        print(f"  {'model':<18}{'of peak':>8}{'req/s':>8}{'thr ratio':>20}{'p50 corr':>20}{'p50 uncorr':>20}{'p99 corr':>20}{'p99 uncorr':>20}{'rounds':>8}")
        for model, fraction, sel in _cells(rate, models, "fraction", args.rates_of_peak):
            both = [r for r in sel if r["throughput_ratio"] is not None]
            print(f"  {model:<18}{100 * fraction:>6.0f} %{sel[0]['level']:>8.0f}{_band(_vals(both, 'throughput_ratio')):>20}"
                  f"{_band(_vals(both, 'p50_ratio')):>20}{_band(_vals(both, 'p50_uncorrected_ratio')):>20}"
                  f"{_band(_vals(both, 'p99_ratio')):>20}{_band(_vals(both, 'p99_uncorrected_ratio')):>20}{len(both):>5}/{len(sel)}")
        print("\nrate mode: each client (ours | perf_analyzer); p50 spread of ours is of the uncorrected p50")
        print(f"  {'model':<18}{'of peak':>8}{'infer/s':>18}{'p50 spread':>18}{'late sends':>12}{'our side':>10}{'cpu us/req':>14}"
              f"{'pa ovh':>8}{'pa delayed':>11}  notes")
        for model, fraction, sel in _cells(rate, models, "fraction", args.rates_of_peak):
            late = _vals(sel, "ours", "extra", "late_share")
            side = _mean(_vals(sel, "ours", "extra", "client_delay_fraction"))
            ovh = _mean(_vals(sel, "perf_analyzer", "extra", "overhead_pct"))
            delayed = _vals(sel, "perf_analyzer", "extra", "delayed_pct")
            cpu = {t: _mean(_vals(sel, t, "client_cpu_us_per_request")) for t in ("ours", "perf_analyzer")}
            warns = sorted({w for r in sel for w in r["perf_analyzer"]["extra"].get("warnings", [])})
            bound = sum(bool(r["ours"]["extra"].get("client_bound")) for r in sel)
            notes = "; ".join(x for x in (
                f"ours client-bound {bound}/{len(sel)}" if bound else "", _failures(sel),
                f"pa warned: {warns[0][:110]}" if warns else "",
            ) if x)
            print(f"  {model:<18}{100 * fraction:>6.0f} %{_fmt(_mean(_vals(sel, 'ours', 'throughput')), '8.0f'):>9} |{_fmt(_mean(_vals(sel, 'perf_analyzer', 'throughput')), '7.0f'):>7}"
                  f"{_spread(_vals(sel, 'ours', 'p50_uncorrected_ms')):>9} |{_spread(_vals(sel, 'perf_analyzer', 'p50_ms')):>7}"
                  f"{_pct(max(late) if late else None, '.2f') + ' max' if late else 'n/a':>12}{_pct(side, '.0f'):>10}"
                  f"{_fmt(cpu['ours'], '.0f'):>7} |{_fmt(cpu['perf_analyzer'], '.0f'):>5}"
                  f"{_fmt(ovh, '.2f') + ' %' if ovh is not None else 'n/a':>8}{_fmt(max(delayed), '.1f') + ' %' if delayed else 'n/a':>11}  {notes}")


def print_targets(rows: list[dict], args) -> None:
    """Issue 13's targets per level and rate (bench/fidelity_targets.py)."""
    from bench.fidelity_targets import cell_verdict

    models = args.models.split(",")
    cells = [(f"c={level:g}", sel) for _, level, sel in _cells([r for r in rows if r["mode"] == "concurrency"],
                                                               models, "level", args.levels)]
    cells += [(f"{100 * fraction:.0f} % of peak", sel) for _, fraction, sel in
              _cells([r for r in rows if r["mode"] == "rate"], models, "fraction", args.rates_of_peak)]
    if not cells:
        return
    print("\ntargets (issue 13): throughput ratio in [0.95, 1.05] unless perf_analyzer's client was the limit,"
          " p50 within +-10 % (rate mode: uncorrected), our spread <= 5 %")
    for name, sel in cells:
        model = sel[0]["model"]
        print(f"  {model:<18}{name:<14}{cell_verdict(sel).text()}")


def estimate(args) -> tuple[int, float, float]:
    """Runs planned, and the bench's duration from them (seconds, low and high): each run is
    start-up + 3 windows (stable at once) .. max windows, plus one server start per model."""
    models = len(args.models.split(","))
    runs = models * 2 * args.rounds * (len(args.levels) + len(args.rates_of_peak))
    window = args.window_ms / 1000
    low = runs * (args.run_overhead_s + min(3, args.max_windows) * window) + models * args.server_start_s
    high = runs * (args.run_overhead_s + args.max_windows * window) + models * args.server_start_s
    return runs, low, high


def out_dir() -> Path:
    return Path(os.environ["OUT"]) if os.environ.get("OUT") else OUT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="identity,vit_tiny")
    parser.add_argument("--levels", default="1,8,32", help="concurrency levels")
    parser.add_argument("--rates-of-peak", default="", help="rate mode at these fractions of the peak, e.g. 0.25,0.5,0.75")
    parser.add_argument("--peak-from", choices=("pa", "ours", "max"), default="pa",
                        help="whose best concurrency level gives the peak (default perf_analyzer's, the independent one)")
    parser.add_argument("--peak", type=float, default=0.0, help="the peak in infer/s, instead of finding it")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--window-ms", type=int, default=2000)
    parser.add_argument("--stability", type=float, default=10.0)
    parser.add_argument("--max-windows", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workers", type=int, default=0, help="our load workers (0 = automatic)")
    parser.add_argument("--pa-retries", type=int, default=1)
    parser.add_argument("--pa-rate-threads", type=int, default=0,
                        help="perf_analyzer --max-threads in rate mode (0 = the peak's concurrency level, 16 to 256)")
    parser.add_argument("--variant", default="cpu")
    parser.add_argument("--budget-s", type=float, default=0.0, help="start no run that would end later than this (0 = no limit)")
    parser.add_argument("--run-overhead-s", type=float, default=2.0, help="estimate: a tool run's start-up and end, seconds")
    parser.add_argument("--server-start-s", type=float, default=30.0, help="estimate: one embedded server start, seconds")
    parser.add_argument("--estimate", action="store_true", help="print the planned runs and the duration estimate, run nothing")
    args = parser.parse_args()
    try:
        args.levels = [int(x) for x in args.levels.split(",") if x.strip()]
        args.rates_of_peak = [float(x) for x in args.rates_of_peak.split(",") if x.strip()]
    except ValueError as exc:
        print(f"error: --levels / --rates-of-peak: {exc}", file=sys.stderr)
        return 2
    if any(f <= 0 for f in args.rates_of_peak) or any(c <= 0 for c in args.levels) or args.rounds < 1:
        print("error: levels, fractions of the peak and rounds must be > 0", file=sys.stderr)
        return 2
    if args.rates_of_peak and not args.levels and not args.peak:
        print("error: rate mode needs concurrency levels to find the peak from, or --peak", file=sys.stderr)
        return 2
    runs, low, high = estimate(args)
    print(f"plan: {runs} tool runs ({args.models}: {len(args.levels)} concurrency levels + {len(args.rates_of_peak)} rates,"
          f" {args.rounds} rounds, 2 tools), {args.window_ms} ms windows, 3..{args.max_windows} windows per run;"
          f" estimate {low:.0f}-{high:.0f} s (assuming {args.run_overhead_s:g} s start-up per run, {args.server_start_s:g} s per server start)"
          + (f"; budget {args.budget_s:.0f} s" if args.budget_s else ""), flush=True)
    if args.estimate:
        return 0
    try:
        binary, env = ensure_perf_analyzer()
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = time.strftime("%Y%m%d-%H%M%S")
    path = out_dir() / f"load_vs_perf_analyzer-{started}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    args.peaks = {}
    budget = Budget(args.budget_s, args)
    t0 = time.monotonic()

    def save(status: str = "running") -> None:
        doc = {"args": vars(args), "status": status, "elapsed_s": time.monotonic() - t0, "skipped_runs": budget.skipped, "rows": rows}
        path.write_text(json.dumps(doc, indent=1))

    def on_term(signum: int, frame: object) -> None:
        raise Stopped()

    signal.signal(signal.SIGTERM, on_term)
    status, code = "finished", 0
    try:
        for model in args.models.split(","):
            bench_model(model, args, binary, env, budget, rows, save)
    except (Stopped, KeyboardInterrupt):
        status, code = "interrupted", 130
        print("\ninterrupted: the summary of what was measured follows", flush=True)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        save(status)
    if budget.skipped and status == "finished":
        status, code = "incomplete", 1  # planned runs were left out: not a finished comparison
        save(status)
    print_summary(rows, args)
    print_targets(rows, args)
    if budget.skipped:
        print(f"\nbudget: {budget.skipped} pairs of runs were not started (--budget-s {args.budget_s:g})")
    print(f"\n{status} in {time.monotonic() - t0:.0f} s; written: {path}")
    return code


if __name__ == "__main__":
    sys.exit(main())
