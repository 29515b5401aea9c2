"""Diagnosis of issue 13 (ours vs perf_analyzer at concurrency 64-256 with 602 KB images): one
embedded server, cases run in alternation, each with where the bytes sit (ss: Recv-Q/Send-Q of
the server's and the clients' sockets, sampled every 0.3 s) and each tool's own latency split.

    python bench/diag_fidelity.py --variant 2x --cases "pa:128,ours:128,ours:128:w16,pa:128:async"
Writes $OUT/diag_fidelity.json (or bench/out/) and prints one line per case.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load_pa_setup import ensure_perf_analyzer  # noqa: E402
from bench.load_vs_perf_analyzer import run_ours, run_perf_analyzer  # noqa: E402


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of a process (utime + stime from /proc)."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return out


def spread(before: dict[int, float], after: dict[int, float], secs: float) -> dict:
    busy = sorted(((after[t] - before.get(t, 0.0)) / secs for t in after), reverse=True)
    return {"threads_over_20pct": sum(1 for b in busy if b > 0.2), "threads_over_5pct": sum(1 for b in busy if b > 0.05),
            "top8_pct": [round(100 * b) for b in busy[:8]], "total_cores": round(sum(busy), 2)}


class QueueSampler(threading.Thread):
    """Sum of Recv-Q and Send-Q over the server's sockets and over the clients' sockets."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.stop, self.samples = port, threading.Event(), []

    def run(self) -> None:
        while not self.stop.wait(0.3):
            srv_r = srv_s = cli_r = cli_s = n_srv = 0
            for line in open("/proc/net/tcp").read().splitlines()[1:]:
                f = line.split()
                if f[3] != "01":  # established
                    continue
                lport, pport = int(f[1].split(":")[1], 16), int(f[2].split(":")[1], 16)
                sq, rq = (int(x, 16) for x in f[4].split(":"))
                if lport == self.port:
                    srv_r, srv_s, n_srv = srv_r + rq, srv_s + sq, n_srv + 1
                elif pport == self.port:
                    cli_r, cli_s = cli_r + rq, cli_s + sq
            self.samples.append((n_srv, srv_r, srv_s, cli_r, cli_s))

    def summary(self) -> dict:
        if not self.samples:
            return {}
        cols = list(zip(*self.samples, strict=False))
        mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
        return {"server_conns": max(cols[0]), "server_recvq_mb": mean(cols[1]) / 1e6, "server_sendq_mb": mean(cols[2]) / 1e6,
                "client_recvq_mb": mean(cols[3]) / 1e6, "client_sendq_mb": mean(cols[4]) / 1e6}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="openclip_vit_b32")
    p.add_argument("--variant", default="2x")
    p.add_argument("--cases", default="pa:64,ours:64,pa:128,ours:128")
    p.add_argument("--window-ms", type=int, default=2000)
    p.add_argument("--max-windows", type=int, default=6)
    p.add_argument("--stability", type=float, default=10.0)
    p.add_argument("--pyspy", default="", help="case index to profile a worker of with py-spy")
    args = p.parse_args()
    args.batch = 1
    binary, env = ensure_perf_analyzer()
    out_dir = Path(os.environ.get("OUT", ROOT / "bench" / "out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    from engine.server.embedded import EmbeddedServer

    rows = []
    with tempfile.TemporaryDirectory() as logs, EmbeddedServer(model=args.model, variant=args.variant, log_dir=Path(logs)) as srv:
        port = int(srv.http_url.rsplit(":", 1)[1])
        print(f"server {srv.http_url} variant {srv.variant}", flush=True)
        for i, case in enumerate(args.cases.split(",")):
            tool, level, *opts = case.split(":")
            level = int(level)
            args.workers = 0
            args.pa_extra = []
            knobs = []
            for o in opts:
                if o.startswith("w"):
                    args.workers = int(o[1:])
                elif o in ("burst", "lazy"):
                    knobs.append(o)
                elif o == "async":
                    args.pa_extra = ["--async"]
                elif o.startswith("threads"):
                    args.pa_extra = ["--max-threads", o[7:]]
                elif o.startswith("sndbuf"):
                    knobs.append(f"sndbuf={o[6:]}")
            os.environ["GPUSCALE_LOAD_DIAG"] = ",".join(knobs)
            sampler = QueueSampler(port)
            sampler.start()
            prof = None
            if str(i) == args.pyspy and tool == "ours":
                prof = threading.Thread(target=_pyspy, args=(out_dir / f"pyspy_case{i}.txt",), daemon=True)
                prof.start()
            t0 = time.monotonic()
            spid = int(subprocess.run(["pgrep", "-x", "-P", str(srv.pid), "tritonserver"], capture_output=True, text=True).stdout.split()[0])
            cpu0 = thread_cpu(spid)
            m = run_perf_analyzer(binary, env, srv.http_url, args.model, level, args) if tool == "pa" else asyncio.run(run_ours(srv.http_url, args.model, level, args))
            sampler.stop.set()
            sampler.join()
            secs = time.monotonic() - t0
            threads = spread(cpu0, thread_cpu(spid), secs)
            row = {"case": case, "tool": tool, "level": level, **asdict(m), "queues": sampler.summary(), "secs": secs, "server_threads": threads}
            rows.append(row)
            x = m.extra
            q = row["queues"]
            print(f"{case:<22} thr {m.throughput or 0:8.0f}  p50 {m.p50_ms or 0:6.2f} p99 {m.p99_ms or 0:6.2f} ms  "
                  f"cpu/req {m.client_cpu_us_per_request or 0:5.0f} us  srv/req {m.server_us_per_request or 0:6.0f} us  "
                  f"q {x.get('server_queue_us', 0):6.0f} inf {x.get('server_infer_us', 0):6.0f} batch {x.get('avg_batch') or 0:4.1f}  "
                  f"write {x.get('write_p50_us') or x.get('client_send_us') or 0:6.0f} fb {x.get('first_byte_p50_us') or x.get('network_server_us') or 0:6.0f} "
                  f"ours {x.get('client_delay_p50_us') or x.get('client_recv_us') or 0:5.0f}  "
                  f"srvRecvQ {q.get('server_recvq_mb', 0):6.1f}MB cliSendQ {q.get('client_sendq_mb', 0):5.1f}MB conns {q.get('server_conns', 0)} [{m.status}]\n"
                  f"{'':22} server threads >20%: {threads['threads_over_20pct']} >5%: {threads['threads_over_5pct']} top {threads['top8_pct']} total {threads['total_cores']} cores",
                  flush=True)
    (out_dir / "diag_fidelity.json").write_text(json.dumps(rows, indent=1, default=str))
    return 0


def _pyspy(path: Path) -> None:
    time.sleep(4)
    pids = subprocess.run(["pgrep", "-f", "engine.load.worker"], capture_output=True, text=True).stdout.split()
    if pids:
        subprocess.run(["py-spy", "record", "-d", "4", "-r", "200", "-p", pids[0], "-f", "raw", "-o", str(path), "--nonblocking"],
                       capture_output=True, timeout=30)


if __name__ == "__main__":
    sys.exit(main())
