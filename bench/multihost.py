"""Load from 1, 2 and 4 client processes against one server, through the multi-host engine (each
process a "host" of one group on loopback, `--hosts N --rendezvous`), with perf_analyzer as the
anchor: N perf_analyzer processes side by side, each at its share of the same concurrency, their
throughputs summed. Rounds alternate the order of the tools and of N.

Each of our hosts runs --workers load worker processes (default 1: one client process per host,
where one client process is the limit), so N hosts are N client processes, as N perf_analyzers
are. Our rows give the level's throughput (the hosts' summed), its p50/p99 merged from the hosts'
histograms, each host's throughput and whether a host was client-bound; perf_analyzer's give the
summed throughput and each process's p50/p99. The JSON and a Markdown table go to $OUT.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import ROOT, out_dir, stamp

GPU_RUN = ("1x H200, one 10-minute device call:\n"
           "  python -m bench multihost --model openclip_vit_b32 --variant 1x --concurrency 256 --hosts-list 1,2,4 "
           "--rounds 2 --window-ms 2000 --max-windows 5 --warmup-s 2")


def build_parser(prog: str, _stage: str = "") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=f"Fits: {GPU_RUN}")
    p.add_argument("--model", default="identity")
    p.add_argument("--variant", default="cpu", help="the embedded server's config variant: cpu, 1x, ...")
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--hosts-list", default="1,2,4", help="client processes to compare, comma-separated")
    p.add_argument("--workers", type=int, default=1, help="our load worker processes per host (load.workers)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--window-ms", type=int, default=2000)
    p.add_argument("--max-windows", type=int, default=5)
    p.add_argument("--stability", type=float, default=10.0, help="percent")
    p.add_argument("--warmup-s", type=float, default=2.0)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--no-pa", action="store_true", help="leave perf_analyzer out")
    p.add_argument("--pa-stability", type=float, default=0.0,
                   help="perf_analyzer's -s, percent (0: --stability); it gives no figure for a level it cannot stabilise")
    p.add_argument("--timeout-s", type=float, default=300.0, help="each run's limit")
    return p


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ours(args: argparse.Namespace, url: str, hosts: int, folder: Path) -> dict[str, Any]:
    """One run of our engine from ``hosts`` processes; the head's level as a row."""
    from engine.events import LevelResult
    from engine.multihost.group import TOKEN_ENV, new_token
    from engine.record.reader import Recording

    sets = {"model.name": args.model, "load.concurrency": args.concurrency, "load.window_ms": args.window_ms,
            "load.max_windows": args.max_windows, "load.stability_percent": args.stability,
            "load.warmup_s": args.warmup_s, "load.batch_size": args.batch, "load.workers": args.workers,
            "load.max_trials": 1, "load.contended_percent": 100}
    base = [sys.executable, "-m", "tui.cli", "run", "--record", "--no-check", "--url", url,
            *(x for k, v in sets.items() for x in ("--set", f"{k}={v}"))]
    port = _free_port()
    group = ["--hosts", str(hosts), "--rendezvous", f"127.0.0.1:{port}"] if hosts > 1 else []
    started = time.monotonic()
    # one token for the group, as a scheduler hands it to every host (a member without it is refused)
    env = {**os.environ, TOKEN_ENV: new_token()}
    members = [subprocess.Popen([*base, "--no-record", *group, "--rank", str(r)], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env) for r in range(1, hosts)]
    try:
        head = subprocess.run([*base, "-o", str(folder), *group], cwd=ROOT, capture_output=True, text=True,
                              timeout=args.timeout_s, env=env)
    finally:
        said = []  # a member that failed: its last line, beside the head's
        for rank, m in enumerate(members, 1):
            try:
                out, _ = m.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                m.kill()
                out, _ = m.communicate()
            if m.returncode:
                said.append(f"member {rank}: {(out.strip().splitlines() or ['no output'])[-1][:160]}")
    row: dict[str, Any] = {"tool": "ours", "hosts": hosts, "exit": head.returncode,
                           "seconds": round(time.monotonic() - started, 1)}
    paths = sorted(folder.glob("*.sqlite"))
    if not paths:
        row["error"] = "; ".join([(head.stderr.strip().splitlines() or ["no recording"])[-1][:200], *said])
        return row
    with Recording.open(paths[-1]) as rec:
        levels = [e for e in rec.events() if isinstance(e, LevelResult)]
    if not levels:
        row["error"] = "no level result"
        return row
    lv = levels[-1]
    row.update({"status": lv.status, "throughput": lv.throughput_ips,
                "p50_ms": lv.latency.p50 * 1e3 if lv.latency.p50 else None,
                "p99_ms": lv.latency.p99 * 1e3 if lv.latency.p99 else None,
                "client_bound": lv.audit.client_bound, "reasons": lv.audit.reasons, "degraded": lv.degraded,
                "server_requests": lv.server.request_count if lv.server else None, "requests": lv.requests,
                "per_host": [{"rank": h.rank, "throughput": h.throughput_ips, "client_bound": h.audit.client_bound,
                              "cpu_percent": h.audit.cpu_percent, "clock_offset_us": h.clock_offset_s * 1e6
                              if h.clock_offset_s is not None else None} for h in lv.hosts]})
    return row


def _theirs(args: argparse.Namespace, url: str, hosts: int, pa: Any) -> dict[str, Any]:
    """``hosts`` perf_analyzer processes side by side, each at its share of the concurrency."""
    from bench.tools import run_perf_analyzer
    from engine.multihost.shares import host_share

    pa_args = argparse.Namespace(batch=args.batch, window_ms=args.window_ms, stability=args.pa_stability or args.stability,
                                 max_windows=args.max_windows)
    shares = [host_share(args.concurrency, hosts, r, False) for r in range(hosts)]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=hosts) as pool:
        measures = list(pool.map(lambda c: run_perf_analyzer(pa, url, args.model, c, pa_args), shares))
    ok = all(m.ok for m in measures)
    return {"tool": "perf_analyzer", "hosts": hosts, "seconds": round(time.monotonic() - started, 1), "ok": ok,
            "throughput": sum(m.throughput or 0.0 for m in measures) if ok else None,
            "p50_ms_each": [m.p50_ms for m in measures], "p99_ms_each": [m.p99_ms for m in measures],
            "errors": [m.status for m in measures if not m.ok]}


def _table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| round | tool | client processes | infer/s | p50 ms | p99 ms | per process infer/s | client-bound | note |",
             "|---:|---|---:|---:|---:|---:|---|---|---|"]
    for r in rows:
        f = lambda x: f"{x:,.0f}" if isinstance(x, (int, float)) else "n/a"  # noqa: E731
        g = lambda x: f"{x:.2f}" if isinstance(x, (int, float)) else "n/a"  # noqa: E731
        if r["tool"] == "ours":
            each = ", ".join(f(h["throughput"]) for h in r.get("per_host", [])) or f(r.get("throughput"))
            lines.append(f"| {r['round']} | ours | {r['hosts']} | {f(r.get('throughput'))} | {g(r.get('p50_ms'))} | "
                         f"{g(r.get('p99_ms'))} | {each} | {r.get('client_bound', 'n/a')} | "
                         f"{r.get('status', '')} {r.get('error', '')} {r.get('degraded', '')}".rstrip() + " |")
        else:
            lines.append(f"| {r['round']} | perf_analyzer | {r['hosts']} | {f(r.get('throughput'))} | "
                         f"{'/'.join(g(x) for x in r['p50_ms_each'])} | {'/'.join(g(x) for x in r['p99_ms_each'])} | | | "
                         f"{'; '.join(r['errors'])} |")
    return lines


def run(args: argparse.Namespace) -> int:
    from engine.server.embedded import EmbeddedServer

    hosts_list = [int(x) for x in args.hosts_list.split(",")]
    out = out_dir() / f"multihost_{stamp()}"
    out.mkdir(parents=True, exist_ok=True)
    pa = None
    if not args.no_pa:
        from bench.tools import ensure_perf_analyzer

        pa = ensure_perf_analyzer()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as logs, EmbeddedServer(model=args.model, variant=args.variant,
                                                               log_dir=Path(logs)) as srv:
        print(f"== {args.model} (variant {srv.variant}) at {srv.http_url}, c={args.concurrency}", flush=True)
        for rnd in range(1, args.rounds + 1):
            order = hosts_list if rnd % 2 else list(reversed(hosts_list))
            for hosts in order:
                tools = ["ours", "pa"] if (rnd + hosts) % 2 else ["pa", "ours"]
                for tool in tools:
                    if tool == "pa" and pa is None:
                        continue
                    if tool == "ours":
                        row = _ours(args, srv.http_url, hosts, out / f"ours_r{rnd}_n{hosts}")
                    else:
                        row = _theirs(args, srv.http_url, hosts, pa)
                    row["round"] = rnd
                    rows.append(row)
                    print(_table([row])[-1], flush=True)
                    (out / "multihost.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    text = "\n".join([f"# multihost: {' '.join(sys.argv[1:])}", "", *_table(rows), ""])
    (out / "multihost.md").write_text(text)
    print(text)
    return 0
