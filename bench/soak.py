"""Soak: a long headless run at moderate load; does the app leak memory, descriptors or disk?

Starts `gpuscale-tui --record` against the embedded server (vit_tiny on CPU here, or whatever the
profile says) with levels that never settle early, samples the app process every 10 s (RSS, open
file descriptors, threads) and the recording's size, and prints:
  RSS growth after the first 5 minutes (target < 10 %), fd count first vs last, and the recording's
  growth: events recorded over time with the R^2 of a straight-line fit (linear = no runaway
  buffering, nothing stalled), and bytes per minute of the closed file. (The file size while
  recording is no measure of that: SQLite's WAL grows to its checkpoint size in the first minutes
  and is then reused, so database + WAL rises in steps.)

    python -m bench soak --minutes 30 [--profile local]

Writes soak.json, soak.log and the recordings to $OUT or .bench-out/.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time

import numpy as np
import psutil

from bench.common import ROOT, out_dir, stamp
from engine.record.reader import Recording


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                epilog="Fits: any box; its own length (--minutes) plus the server's start.")
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--profile", default="local")
    p.add_argument("--model", default="vit_tiny")
    p.add_argument("--concurrency", type=int, default=4, help="moderate load: in flight per level")
    p.add_argument("--interval", type=float, default=10.0)
    return p


def run(args: argparse.Namespace) -> int:
    if args.minutes <= 0 or args.interval <= 0:
        print("soak: --minutes and --interval must be > 0", file=sys.stderr)
        return 2
    out = out_dir()
    rec_dir = out / f"soak_recordings_{stamp()}"
    rec_dir.mkdir(parents=True, exist_ok=True)
    duration = args.minutes * 60
    window_ms = 5000
    windows_per_level = 10
    levels = int(duration / (window_ms / 1000 * windows_per_level)) + 2
    cmd = [sys.executable, "-m", "tui.cli", "--record", "--profile", args.profile, "--output", str(rec_dir),
           "--set", f"model.name={args.model}",
           "--set", "load.concurrency=" + ",".join([str(args.concurrency)] * levels),
           "--set", f"load.window_ms={window_ms}", "--set", f"load.max_windows={windows_per_level}",
           "--set", "load.stability_percent=0.001",  # never settles early: every level runs its windows
           "--set", "load.warmup_s=1"]
    log = open(out / "soak.log", "w")  # noqa: SIM115
    app = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    proc = psutil.Process(app.pid)
    samples: list[dict] = []
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < duration and app.poll() is None:
            time.sleep(args.interval)
            recordings = sorted(rec_dir.glob("*.sqlite"), key=lambda f: f.stat().st_mtime)
            size = events = 0
            if recordings:
                base = recordings[-1]
                size = sum(f.stat().st_size for f in base.parent.glob(base.name + "*"))
                try:
                    with Recording.open(base) as rec:
                        events = sum(rec.event_counts().values())
                except Exception:  # mid-creation
                    pass
            try:
                samples.append({"t": time.monotonic() - t0, "rss": proc.memory_info().rss, "fds": proc.num_fds(),
                                "threads": proc.num_threads(), "recording_bytes": size,
                                "events": events})
            except psutil.NoSuchProcess:
                break
    finally:
        if app.poll() is None:
            app.send_signal(signal.SIGINT)
            try:
                app.wait(60)
            except subprocess.TimeoutExpired:
                app.kill()
    log.close()
    if len(samples) < 3:
        print(f"soak: too few samples; see {out / 'soak.log'}")
        return 1
    t = np.array([s["t"] for s in samples])
    rss = np.array([s["rss"] for s in samples], dtype=float)
    events = np.array([s["events"] for s in samples], dtype=float)
    after5 = rss[t >= min(300.0, t[-1] / 2)]
    growth = (after5[-1] - after5[0]) / after5[0]
    slope, intercept = np.polyfit(t, events, 1)
    fit = slope * t + intercept
    r2 = 1 - float(np.sum((events - fit) ** 2) / max(np.sum((events - events.mean()) ** 2), 1e-9))
    final = sorted(rec_dir.glob("*.sqlite"), key=lambda f: f.stat().st_mtime)[-1].stat().st_size
    result = {
        "minutes": round(t[-1] / 60, 1), "exit_code": app.returncode,
        "rss_mb_at_5min": round(after5[0] / 2**20, 1), "rss_mb_end": round(rss[-1] / 2**20, 1),
        "rss_growth_after_5min_pct": round(100 * growth, 2),
        "fds_first": samples[0]["fds"], "fds_last": samples[-1]["fds"], "fds_max": max(s["fds"] for s in samples),
        "threads_first": samples[0]["threads"], "threads_last": samples[-1]["threads"],
        "events_recorded": int(events[-1]), "events_per_min": round(slope * 60, 1),
        "events_linear_r2": round(r2, 4), "recording_mb_closed": round(final / 2**20, 2),
        "recording_kb_per_min": round(final / 1024 / (t[-1] / 60), 1), "samples": samples,
    }
    (out / "soak.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=1))
    print(f"RSS growth after 5 min: {result['rss_growth_after_5min_pct']} % (target < 10 %)")
    return 0
