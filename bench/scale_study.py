"""Scale out or up, held against perf_analyzer on a box of several GPUs, in one device call.

For each transport, the study itself (`gpuscale-tui study --headless --variants 1x,Nx
--scale-out`); then each config (1x, Nx, 1x*N) on fresh servers, and at the level of the study's
peak our engine and perf_analyzer 2.41 alone, in alternating rounds. Against 1x*N, N
perf_analyzers run at once, one per server, each with its CUDA region on its own server's GPU.
Per config: the study's peak and SLO point, each tool's rounds (median, min-max), the ratios;
then whether the study's scale-out-or-up answer and its stop-at match perf_analyzer's ranking.

    python -m bench scale_study --gpus 2 --transports http,cuda_shm --rounds 3
    python -m bench scale_study --gpus 4 --transports cuda_shm --study-variants 1x,2x,4x --configs 4x,1x*4
    python -m bench scale_study --cpu --rounds 3        # here: identity, cpu, cpu2, cpu*2

Each result is appended to scale_study.jsonl as it comes; scale_study.md and the logs go to $OUT
(or .bench-out/), the studies' recordings to scale_study_recordings.tar.gz.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.common import ROOT, GpuBusy, ServerQueue, core_split, model_stats, out_dir, stats_delta
from bench.tools import Measure, SetupError, ensure_perf_analyzer, run_perf_analyzer
from bench.transports import PA_SHM as PA_MODES
from engine.analysis.scale_out import TIE  # the study's own tie between scale out and up

PA_SHM = {t: flags for t, flags in PA_MODES.items() if t != "grpc"}  # the studies here run over HTTP framings
NO_TEXTUAL = "import sys; sys.modules['textual'] = None; from tui.cli import main; sys.exit(main(sys.argv[1:]))"


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0],
        epilog="Fits: 2x or 4x H100/H200, one 10-minute call per box size (window 800 ms, 4 windows):\n"
               "  python -m bench scale_study --gpus 2 --transports http,cuda_shm --rounds 3 --budget-s 540\n"
               "Here: python -m bench scale_study --cpu --rounds 3")
    p.add_argument("--cpu", action="store_true", help="this CPU box: model identity, configs cpu, cpu2, cpu*2")
    p.add_argument("--model", default="")
    p.add_argument("--gpus", type=int, default=0, help="use the first N GPUs (CUDA_VISIBLE_DEVICES); 0: all")
    p.add_argument("--profile", default="", help="the study's profile (default: local on --cpu, else 2x_h200 / 4x_h200)")
    p.add_argument("--study-variants", default="", help="the study's --variants (default 1x,Nx; --cpu: cpu,cpu2)")
    p.add_argument("--configs", default="", help="configs held against perf_analyzer (default: every config of the study)")
    p.add_argument("--transports", default="http,cuda_shm")
    p.add_argument("--levels", default="", help="the study's concurrency levels (default 32,128,256,512; --cpu: 1,4,8)")
    p.add_argument("--slo", default="p99=50ms", help="the study's latency target (--cpu: p99=200ms)")
    p.add_argument("--scale-out-profile", default="1x_h200", help="prices each one-GPU box of 1x*N (the study's flag)")
    p.add_argument("--search-steps", type=int, default=2, help="the study's --search-steps for its SLO point")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--window-ms", type=int, default=800)
    p.add_argument("--max-windows", type=int, default=4)
    p.add_argument("--stability", type=float, default=10.0, help="percent")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--study-timeout-s", type=float, default=300.0)
    p.add_argument("--budget-s", type=float, default=0.0, help="start nothing after this many seconds (0: no limit)")
    p.add_argument("--round-levels", default="",
                   help="the rounds' levels; 'peak' is the study's peak of each config, else the top level (default: peak)")
    p.add_argument("--pa-extra", default="", help="more perf_analyzer flags, space-separated (e.g. '--max-threads 16')")
    p.add_argument("--client-cores", type=int, default=0,
                   help="the rounds' clients (ours and perf_analyzer) on this many cores of their own, the servers on"
                        " the rest (0: all share every core): a client's CPU then cannot come out of the server's")
    p.add_argument("--skip-study", action="store_true", help="only the rounds (at --studies-from's peaks, else the top level)")
    p.add_argument("--studies-from", type=Path, default=None, metavar="JSONL",
                   help="an earlier call's scale_study.jsonl: its studies stand for this run's (a device call is 10 minutes)")
    return p


# --------------------------------------------------------------------------- the studies


def study_command(args: argparse.Namespace, transport: str, folder: Path) -> list[str]:
    sets = {"load.transport": transport, "load.concurrency": args.levels, "load.window_ms": str(args.window_ms),
            "load.max_windows": str(args.max_windows), "load.warmup_s": "1", "load.stability_percent": f"{args.stability:g}",
            "load.batch_size": str(args.batch), "model.name": args.model}
    if args.cpu:
        # a 2-core box shared with the servers: the box-noise rule off, as the tests do
        sets.update({"load.warmup_s": "0.3", "load.min_window_requests": "20", "hardware.cost_per_hour": "1.5",
                     "load.contended_percent": "100", "load.max_trials": "1"})
    flat = [x for k, v in sets.items() for x in ("--set", f"{k}={v}")]
    price = [] if args.cpu else ["--scale-out-profile", args.scale_out_profile]
    return [sys.executable, "-c", NO_TEXTUAL, "study", "--headless", "--record", "--scale-out", *price, "--profile", args.profile,
            "--variants", args.study_variants, "--slo", args.slo, "--search-steps", str(args.search_steps), *flat,
            "-o", str(folder)]


def run_study(args: argparse.Namespace, transport: str, folder: Path, log: Path) -> dict[str, Any]:
    """The study over one transport: its exit code, printed answers and each config's figures."""
    cmd = study_command(args, transport, folder)
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=args.study_timeout_s, check=False, stdin=subprocess.DEVNULL)
        code: int | str = done.returncode
        text = done.stdout
    except subprocess.TimeoutExpired as exc:
        code, text = "timeout", exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    log.write_text(" ".join(cmd[3:]) + "\n\n" + text)
    lines = text.splitlines()
    scale = [ln for ln in lines if " → " in ln and ("box of" in ln or "boxes of" in ln)]
    answer = next((ln for ln in reversed(lines) if ln.startswith("answer: ")), None)
    out: dict[str, Any] = {"transport": transport, "exit_code": code, "seconds": round(time.monotonic() - started, 1),
                           "scale_line": scale[-1] if scale else None, "answer": answer, "configs": {},
                           "forecasts": list(dict.fromkeys(ln.strip() for ln in lines if ln.strip().startswith("forecast")))}
    index = next(iter(folder.glob("*.study.json")), None)
    if index is None:
        return out
    from engine.study.figures import study_figures
    from engine.study.index import read_index

    runs = {r.variant: r for r in read_index(index).runs}
    out["runs"] = {v: {"status": r.status, "exit_code": r.exit_code, "error": r.error} for v, r in runs.items()}
    try:
        figures = study_figures(index)
    except Exception as exc:  # noqa: BLE001 - the row says why, the bench goes on
        out["figures_error"] = f"{type(exc).__name__}: {exc}"
        return out
    for c in figures.configs:
        peak = c.findings.peak
        out["configs"][c.variant] = {
            "peak": peak.throughput if peak else None, "peak_level": peak.level if peak else None,
            "peak_status": peak.status if peak else None,
            "slo_throughput": c.slo.throughput if c.slo else None, "slo_level": c.slo.level if c.slo else None,
            "not_decided": c.not_decided,
        }
    out["stop"] = figures.stop.reason
    out["stop_variant"] = figures.stop.variant
    out["scale_choice"] = [s.answer.choice for s in figures.scale]
    return out


# --------------------------------------------------------------------------- the rounds


def start_servers(args: argparse.Namespace, variant: str) -> Any:
    from engine.profiles import scale_out_parts
    from engine.server.embedded import EmbeddedServer
    from engine.server.fleet import ServerFleet

    logs = Path(tempfile.mkdtemp(prefix="scale-study-logs-"))
    cpus = args.cores[1] if getattr(args, "cores", None) else ()
    if scale_out_parts(variant):
        return ServerFleet(variant, log_dir=logs, model=args.model, cpus=cpus).start()
    return EmbeddedServer(model=args.model, variant=variant, log_dir=logs, cpus=cpus).start()



def endpoints_of(started: Any) -> list[Any]:
    from engine.server.fleet import ServerFleet
    from engine.server.supervisor import FleetMember
    from engine.triton.target_setup import fleet_endpoints

    if not isinstance(started, ServerFleet):
        return []
    return fleet_endpoints([FleetMember(s.http_url, s.metrics_url, s.grpc_url, g)
                            for s, g in zip(started.servers, started.client_gpus, strict=True)])


async def _ours(started: Any, args: argparse.Namespace, level: int, transport: str) -> Measure:
    from bench.tools import ours_measure
    from engine.load.sweep import run_sweep
    from engine.profiles import Load
    from engine.triton.api import TritonApi
    from engine.triton.endpoints import describe_endpoints
    from engine.triton.target import Target

    target = Target(started.http_url, args.model, endpoints=endpoints_of(started))
    info = await describe_endpoints(target)
    load = Load(mode="concurrency", concurrency=[level], batch_size=args.batch, window_ms=args.window_ms,
                stability_percent=args.stability, max_windows=args.max_windows, warmup_s=0.0,
                request_timeout_s=30.0, transport=transport,
                contended_percent=100.0 if args.cpu else Load().contended_percent)
    gpus = tuple(started.prepared.gpus) if started.prepared else ()
    (r,) = await run_sweep(TritonApi(target, info), load, lambda e: None, asyncio.Event(), gpus=gpus)
    return ours_measure(r)


def ours(started: Any, args: argparse.Namespace, level: int, transport: str) -> Measure:
    """Our engine alone; against one server, with its client CPU per request (a fleet's requests
    are counted on each server, so there it is left out rather than undercounted)."""
    from bench.tools import RunAccount
    from engine.server.fleet import ServerFleet

    t0 = time.monotonic()
    try:
        if isinstance(started, ServerFleet):
            m = asyncio.run(_ours(started, args, level, transport))
        else:
            with RunAccount(started.http_url, args.model, "engine.load.worker", include_self=True, level=level) as acct:
                m = asyncio.run(_ours(started, args, level, transport))
            m = acct.fill(m)
    except Exception as exc:  # noqa: BLE001 - reported in the row
        m = Measure("ours", False, f"failed: {type(exc).__name__}: {exc}"[:200])
    m.wall_s = time.monotonic() - t0
    return m


def pa_fleet(pa: tuple[Path, dict[str, str]], started: Any, args: argparse.Namespace, level: int,
             transport: str) -> Measure:
    """perf_analyzer alone: one against one server; N at once against a fleet's N servers, the
    level split evenly, each seeing only its server's GPU (its CUDA region goes there)."""
    from engine.load.spread import even_split
    from engine.server.fleet import ServerFleet

    binary, env = pa
    servers = started.servers if isinstance(started, ServerFleet) else [started]
    shares = even_split(level, len(servers))
    t0 = time.monotonic()

    def one(k: int) -> Measure:
        pin = getattr(servers[k], "pinned_gpu", None)
        own = {**env, "CUDA_VISIBLE_DEVICES": pin} if pin is not None else env
        return run_perf_analyzer((binary, own), servers[k].http_url, args.model, shares[k], args,
                                 extra=[*PA_SHM[transport], *args.pa_extra.split()])

    with ThreadPoolExecutor(max_workers=len(servers)) as pool:
        each = list(pool.map(one, range(len(servers))))
    if len(each) == 1:
        return each[0]
    ok = all(m.ok for m in each)
    m = Measure("perf_analyzer", ok, "stable" if ok else "; ".join(f"server {i + 1}: {x.status}" for i, x in enumerate(each) if not x.ok),
                throughput=sum(x.throughput or 0.0 for x in each) if ok else None,
                p50_ms=max(x.p50_ms or 0.0 for x in each) if ok else None,
                p99_ms=max(x.p99_ms or 0.0 for x in each) if ok else None)
    m.extra["each"] = [x.throughput for x in each]
    m.wall_s = time.monotonic() - t0
    return m



def server_urls(started: Any) -> list[Any]:
    """Each server of a config (one, or a fleet's N)."""
    from engine.server.fleet import ServerFleet

    return list(started.servers) if isinstance(started, ServerFleet) else [started]


def fleet_stats(started: Any, model: str) -> dict[str, int]:
    """Triton's cumulative statistics summed over a config's servers."""
    total: dict[str, int] = {}
    for server in server_urls(started):
        for k, v in model_stats(server.http_url, model).items():
            total[k] = total.get(k, 0) + v
    return total


def hold_level(args: argparse.Namespace, pa: tuple[Path, dict[str, str]], started: Any, config: str, t: str,
               level: int, fig: dict[str, Any], mps: tuple[bool, str], emit: Any, time_left: Any) -> dict[str, Any]:
    """Our engine and perf_analyzer alone at one level, in alternating rounds; with each round,
    what the server saw: its mean batch, µs per request in each section, requests waiting."""
    got: dict[str, list[Measure]] = {"ours": [], "pa": []}
    for rnd in range(args.rounds):
        if not time_left():
            break
        for tool in (("pa", "ours") if rnd % 2 == 0 else ("ours", "pa")):
            before = fleet_stats(started, args.model)
            with GpuBusy(machine_gpus(started)) as busy, \
                    ServerQueue([s.metrics_url for s in server_urls(started)]) as waiting:
                m = pa_fleet(pa, started, args, level, t) if tool == "pa" else ours(started, args, level, t)
            m.extra["gpu_busy_each"] = busy.each()
            m.extra["server"] = {**stats_delta(before, fleet_stats(started, args.model)), "waiting": waiting.mean()}
            got[tool].append(m)
            emit("round", {"config": config, "transport": t, "level": level, "round": rnd, "tool": tool,
                           "mps": mps[0], **asdict(m)})
            figures = (f"{m.throughput:9,.0f}/s p99 {m.p99_ms:7.1f} ms" if m.ok and m.throughput and m.p99_ms
                       else "not measured")
            srv = m.extra["server"]
            cpu = m.client_cpu_us_per_request
            print(f"   {config} {t} c={level} r{rnd} {tool:<4} {figures}  gpu {m.extra.get('gpu_busy_each')}"
                  f"  client {f'{cpu:,.0f} µs/req' if cpu else 'n/a'}"
                  f"  batch {srv.get('avg_batch')} queue {srv.get('queue_us_per_req')} µs waiting {srv.get('waiting')}"
                  f"  [{m.status[:80]}]", flush=True)
    row = {"config": config, "transport": t, "level": level, "mps": mps[0], "mps_why": mps[1],
           "study_peak": fig.get("peak"), "study_slo": fig.get("slo_throughput"),
           "ours": _spread([m.throughput for m in got["ours"] if m.ok and m.throughput]),
           "pa": _spread([m.throughput for m in got["pa"] if m.ok and m.throughput]),
           "failed": [m.status for ms in got.values() for m in ms if not m.ok]}
    emit("config", row)
    return row


def machine_gpus(started: Any) -> tuple[int, ...]:
    """The NVML indices the config's servers use (GpuBusy reads NVML, which sees every GPU): our
    GPU g is the g-th that CUDA_VISIBLE_DEVICES leaves (engine/libnvml.py's one rule for it)."""
    from engine import libnvml
    from engine.server.fleet import ServerFleet

    seen = libnvml.visible()
    ours = seen.indices if seen is not None else ()
    gpus = ([g for g in started.client_gpus if g is not None] if isinstance(started, ServerFleet)
            else list(started.prepared.gpus) if started.prepared else [])
    return tuple(ours[g] for g in gpus if g < len(ours))


def _spread(values: list[float]) -> dict[str, float] | None:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else None


# --------------------------------------------------------------------------- the verdicts


def best_medians(rows: list[dict[str, Any]], transport: str) -> dict[str, float | None]:
    """perf_analyzer's figure for each config over one transport: its best median over the
    levels the rounds ran (None where no level gave one)."""
    best: dict[str, float | None] = {}
    for r in rows:
        if r["transport"] == transport:
            seen = [x for x in (best.get(r["config"]), (r["pa"] or {}).get("median")) if x is not None]
            best[r["config"]] = max(seen, default=None)
    return best


def peaks_held(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each config's peak as each tool found it over the rounds' levels (its best median, and the
    level), beside the study's peak: the issue's "each config's peak within 5 % of perf_analyzer's
    (or inside both tools' spread)". The same-level ratios are in the rows; a tool past its
    knee at a level the other is not reads apart there, which says nothing about the peaks."""
    out: list[dict[str, Any]] = []
    for key in dict.fromkeys((r["transport"], r["config"]) for r in rows):
        at = [r for r in rows if (r["transport"], r["config"]) == key]

        def best(tool: str, at: list[dict[str, Any]] = at) -> dict[str, Any] | None:
            got = [r for r in at if r[tool]]
            return max(({"level": r["level"], **r[tool]} for r in got), key=lambda x: x["median"]) if got else None

        ours_, pa_ = best("ours"), best("pa")
        study = next((r["study_peak"] for r in at if r["study_peak"]), None)

        def held(x: float | None, lo: float | None = None, hi: float | None = None,
                 pa_: dict[str, Any] | None = pa_) -> str:
            if x is None or pa_ is None:
                return "not measured"
            ratio = x / pa_["median"]
            if abs(ratio - 1) <= 0.05:
                return f"{ratio:.3f}: within 5 %"
            inside = lo is not None and hi is not None and lo <= pa_["max"] and pa_["min"] <= hi
            return f"{ratio:.3f}: " + ("outside 5 %, inside both spreads" if inside else "OUTSIDE 5 %")

        out.append({"transport": key[0], "config": key[1], "study_peak": study, "ours": ours_, "pa": pa_,
                    "study_vs_pa": held(study),
                    "ours_vs_pa": held(ours_ and ours_["median"], ours_ and ours_["min"], ours_ and ours_["max"])})
    return out


def ranking(peaks: dict[str, float | None], n: int, base: str) -> dict[str, Any]:
    """perf_analyzer's answers from its medians: scale out or up (N one-GPU servers against one
    N-GPU server, the same price per GPU), and the stop-at rule the study uses."""
    from engine.analysis.study import ConfigPoint, stop_at

    out_, up = peaks.get(f"{base}*{n}"), peaks.get(f"{n}x" if base == "1x" else f"cpu{n}")
    choice = None
    if out_ and up:
        choice = "either" if abs(out_ - up) / max(out_, up) <= TIE else ("scale out" if out_ > up else "scale up")
    units = {base: 1, (f"{n}x" if base == "1x" else f"cpu{n}"): n}
    points = [ConfigPoint(v, u, peaks.get(v), None, "" if peaks.get(v) else "no result") for v, u in units.items()]
    stop = stop_at(points, "GPU" if base == "1x" else "CPU instance")
    return {"scale": choice, "stop_variant": stop.variant, "stop": stop.reason}


def write_md(path: Path, args: argparse.Namespace, studies: list[dict[str, Any]], rows: list[dict[str, Any]],
             verdicts: list[dict[str, Any]]) -> str:
    lines = [f"# scale_study: {args.model}, {args.gpus or 'all'} GPU(s), transports {args.transports}, {args.rounds} rounds", ""]
    for s in studies:
        lines += [f"## study over {s['transport']}: exit {s['exit_code']}, {s['seconds']} s", "",
                  f"- scale: `{s.get('scale_line')}`", f"- answer: `{s.get('answer')}`",
                  *[f"- `{f}`" for f in s.get("forecasts", [])], ""]
        for v, r in (s.get("runs") or {}).items():
            lines.append(f"- {v}: {r['status']} (exit {r['exit_code']}){': ' + str(r['error'])[:200] if r['error'] else ''}")
        lines.append("")
    lines += ["## each config: the study's peak, our rounds and perf_analyzer's (images/s)", "",
              "| transport | config | level | study peak | study at SLO | ours median (min-max) | perf_analyzer median (min-max) | ours/pa | study/pa |",
              "|---|---|---:|---:|---:|---|---|---:|---:|"]

    def rng(x: dict[str, float] | None) -> str:
        return f"{x['median']:,.0f} ({x['min']:,.0f}-{x['max']:,.0f})" if x else "not measured"

    def num(x: float | None) -> str:
        return f"{x:,.0f}" if x else "not measured"

    for r in rows:
        o, p = r["ours"], r["pa"]
        ratio = f"{o['median'] / p['median']:.3f}" if o and p else "n/a"
        sratio = f"{r['study_peak'] / p['median']:.3f}" if r["study_peak"] and p else "n/a"
        lines.append(f"| {r['transport']} | {r['config']} | {r['level']} | {num(r['study_peak'])} | {num(r['study_slo'])} "
                     f"| {rng(o)} | {rng(p)} | {ratio} | {sratio} |")
    lines += ["", "## each config's peak, as each tool found it over the rounds' levels (best median, its level)", "",
              "| transport | config | study peak | ours best (level) | perf_analyzer best (level) | study / pa | ours / pa |",
              "|---|---|---:|---|---|---|---|"]
    for h in peaks_held(rows):
        def best(x: dict[str, Any] | None) -> str:
            return f"{rng(x)} at {x['level']}" if x else "not measured"

        lines.append(f"| {h['transport']} | {h['config']} | {num(h['study_peak'])} | {best(h['ours'])} | {best(h['pa'])} "
                     f"| {h['study_vs_pa']} | {h['ours_vs_pa']} |")
    lines += ["", "## the answers against perf_analyzer's ranking", ""]
    for v in verdicts:
        lines.append(f"- {v['transport']}: study `{v['study_scale']}` / stop at {v['study_stop']}; perf_analyzer "
                     f"`{v['pa']['scale']}` / stop at {v['pa']['stop_variant']}: {v['match']}")
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text


def run(args: argparse.Namespace) -> int:
    started_at = time.monotonic()
    if args.gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(args.gpus))
    n = args.gpus or 2
    base = "cpu" if args.cpu else "1x"
    args.model = args.model or ("identity" if args.cpu else "openclip_vit_b32")
    args.profile = args.profile or ("local" if args.cpu else f"{n}x_h200")
    args.study_variants = args.study_variants or (f"cpu,cpu{n}" if args.cpu else f"1x,{n}x")
    args.levels = args.levels or ("1,4,8" if args.cpu else "32,128,256,512")
    if args.cpu and args.slo == "p99=50ms":
        args.slo = "p99=200ms"
    args.cores = core_split(args.client_cores)  # before any pinning narrows this process's cores
    if args.cores[0]:
        print(f"clients on cores {args.cores[0][0]}-{args.cores[0][-1]}, servers on {args.cores[1][0]}-{args.cores[1][-1]}"
              " (the study itself runs unpinned)", flush=True)
    transports = [t for t in args.transports.split(",") if t]
    bad = [t for t in transports if t not in PA_SHM]
    if bad:
        print(f"scale_study: unknown transport {bad[0]!r} ({', '.join(PA_SHM)})", file=sys.stderr)
        return 2
    try:
        pa = ensure_perf_analyzer()
    except SetupError as exc:
        print(f"scale_study: {exc}", file=sys.stderr)
        return 2
    out = out_dir()
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "scale_study.jsonl"
    rec_root = Path(tempfile.mkdtemp(prefix="scale-study-rec-"))

    def emit(kind: str, row: dict[str, Any]) -> None:
        with jsonl.open("a") as f:
            f.write(json.dumps({"kind": kind, **row}, default=str) + "\n")

    def time_left() -> bool:
        return not args.budget_s or time.monotonic() - started_at < args.budget_s

    studies: list[dict[str, Any]] = []
    if args.studies_from is not None:
        studies = [{k: v for k, v in row.items() if k != "kind"} for row in map(json.loads, args.studies_from.read_text().splitlines())
                   if row.get("kind") == "study" and row.get("transport") in transports]
        for s in studies:
            emit("study", s)
    for t in transports:
        if any(s["transport"] == t for s in studies):
            continue
        if args.skip_study or not time_left():
            break
        print(f"== study over {t}", flush=True)
        s = run_study(args, t, rec_root / f"study_{t}", out / f"scale_study_{t}.log")
        studies.append(s)
        emit("study", s)
        print(f"   exit {s['exit_code']} in {s['seconds']} s\n   {s.get('scale_line')}\n   {s.get('answer')}", flush=True)
    by_transport = {s["transport"]: s for s in studies}
    configs = ([] if args.rounds == 0  # --rounds 0: the studies alone
               else [c for c in args.configs.split(",") if c] or [*args.study_variants.split(","), f"{base}*{n}"])
    top = max(int(x) for x in args.levels.split(","))
    round_levels = [x for x in args.round_levels.split(",") if x] or ["peak"]
    rows: list[dict[str, Any]] = []
    for config in configs:
        if not time_left():
            print(f"== {config}: not run (past --budget-s)", flush=True)
            continue
        try:
            started = start_servers(args, config)
        except Exception as exc:  # noqa: BLE001 - the config did not start: its rows say so
            print(f"== {config}: did not start: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            emit("start_failed", {"config": config, "error": str(exc)[:2000]})
            continue
        clients = args.cores[0]
        if clients:  # this thread's children (our load workers, perf_analyzer) inherit it
            os.sched_setaffinity(0, clients)
        try:
            mps = (started.mps_used, started.mps_why)
            print(f"== {config} at {started.http_url}, MPS {'on' if mps[0] else 'off'} ({mps[1]})", flush=True)
            for t in transports:
                fig: dict[str, Any] = by_transport.get(t, {}).get("configs", {}).get(config, {})
                peak_level = int(fig.get("peak_level") or top)
                for level in dict.fromkeys(peak_level if x == "peak" else int(x) for x in round_levels):
                    rows.append(hold_level(args, pa, started, config, t, level, fig, mps, emit, time_left))
        finally:
            started.stop()
    verdicts = []
    for t in transports:
        pa_rank = ranking(best_medians(rows, t), n, base)
        s = by_transport.get(t, {})
        choices = s.get("scale_choice") or [None]
        study_scale, study_stop = choices[-1], s.get("stop_variant")
        line = s.get("answer") or ""
        undecided = "not decided" in line or (s.get("scale_line") or "").endswith("not decided")
        match = ("perf_analyzer gave no ranking (a config not measured)" if pa_rank["scale"] is None
                 else "matches" if study_scale == pa_rank["scale"] and study_stop == pa_rank["stop_variant"]
                 else "not decided (says why)" if undecided else "DIFFERS")
        verdicts.append({"transport": t, "study_scale": study_scale, "study_stop": study_stop, "pa": pa_rank, "match": match})
        emit("verdict", verdicts[-1])
    text = write_md(out / "scale_study.md", args, studies, rows, verdicts)
    print(text)
    with tarfile.open(out / "scale_study_recordings.tar.gz", "w:gz") as tar:
        tar.add(rec_root, arcname="recordings")
    return 0 if rows and all(r["pa"] and r["ours"] for r in rows) else 1
