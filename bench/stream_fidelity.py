"""Streaming fidelity: our grpc_stream against perf_analyzer 2.41 ``-i grpc --streaming`` on the embedded toy_llm, per level.

One embedded server; at each level perf_analyzer and our sweep run in turn, alternating which goes
first each round, with the same prompts (perf_analyzer's input-data JSON) and every response
checked on our side. perf_analyzer's figures come from its ``--profile-export-file``: per request
the send time and each response's time give TTFT, the gaps (ITL) and the latency to the last
response; its throughput is the requests whose last response fell inside its measurement
windows over their span. Prints each run, then per level the median over rounds of ours /
theirs with the spread (min-max of the per-round ratios).

    python -m bench stream_fidelity --levels 1 8 32 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ROOT / "tests" / "data" / "toy_llm_prompts.json"
FIGURES = ("rps", "p50", "ttft50", "itl50")


def theirs(pa: Path, env: dict[str, str], grpc_url: str, level: int, data: Path, export: Path,
           interval_ms: int) -> dict[str, Any]:
    import numpy as np

    cmd = [str(pa), "-m", "toy_llm", "-i", "grpc", "--streaming", "-u", grpc_url, "--input-data", str(data),
           "--concurrency-range", str(level), "--measurement-interval", str(interval_ms),
           "--stability-percentage", "25", "--profile-export-file", str(export)]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"perf_analyzer failed: {(run.stdout + run.stderr)[-400:]}")
    experiment = json.loads(export.read_text())["experiments"][-1]
    reqs = [r for r in experiment["requests"] if r.get("response_timestamps")]
    ttft = np.array([r["response_timestamps"][0] - r["timestamp"] for r in reqs]) / 1e6
    latency = np.array([r["response_timestamps"][-1] - r["timestamp"] for r in reqs]) / 1e6
    itl = np.concatenate([np.diff(r["response_timestamps"]) for r in reqs]) / 1e6
    bounds = experiment["window_boundaries"]
    inside = [r for r in reqs if bounds[0] <= r["response_timestamps"][-1] <= bounds[-1]]
    return {"rps": len(inside) / ((bounds[-1] - bounds[0]) / 1e9), "p50": float(np.percentile(latency, 50)),
            "ttft50": float(np.percentile(ttft, 50)), "itl50": float(np.percentile(itl, 50))}


def ours(target: Any, info: Any, level: int, data: Path, interval_ms: int) -> dict[str, Any]:
    from engine.load.sweep import run_sweep
    from engine.profiles import Load

    load = Load(concurrency=[level], transport="grpc_stream", input_data=str(data), window_ms=interval_ms,
                stability_percent=25, warmup_s=1.0, max_windows=10)
    (result,) = asyncio.run(run_sweep(target, info, load, lambda e: None, asyncio.Event()))
    if result.stream is None or result.errors:
        raise RuntimeError(f"our level {level} ended {result.status} with {result.errors} errors")
    return {"rps": result.throughput_rps, "p50": result.latency.p50 * 1e3, "ttft50": result.stream.ttft.p50 * 1e3,
            "itl50": result.stream.itl.p50 * 1e3, "status": result.status}


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     epilog="Fits: CPU here (toy_llm on the embedded server), about 1 minute per level "
                                            "and round; perf_analyzer from .wheels/ (set up on first use).")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--interval-ms", type=int, default=3000, help="measurement window, both tools")
    parser.add_argument("--input-data", type=Path, default=PROMPTS, help="perf_analyzer's input-data JSON for toy_llm")
    return parser


def run(args: argparse.Namespace) -> int:
    from bench.tools import SetupError, ensure_perf_analyzer
    from engine.load.target import Target, describe_target
    from engine.server.embedded import EmbeddedServer

    if args.rounds < 1 or not args.levels or min(args.levels) < 1:
        print("stream_fidelity: --rounds and --levels must be >= 1")
        return 2
    try:
        pa, env = ensure_perf_analyzer()
    except SetupError as exc:
        print(f"stream_fidelity: {exc}")
        return 2
    out = Path(tempfile.mkdtemp(prefix="stream_fidelity_"))
    ratios: dict[int, dict[str, list[float]]] = {level: {k: [] for k in FIGURES} for level in args.levels}
    with EmbeddedServer(model="toy_llm", variant="cpu", log_dir=out) as server:
        host, port = server.http_url.split("://", 1)[1].rsplit(":", 1)
        grpc_url = f"{host}:{int(port) + 1}"
        target = Target(server.http_url, "toy_llm")
        info = asyncio.run(describe_target(target))
        for r in range(args.rounds):
            for level in args.levels:
                runs: dict[str, dict[str, Any]] = {}
                order = ("perf_analyzer", "ours") if r % 2 == 0 else ("ours", "perf_analyzer")
                for tool in order:
                    try:  # a fresh export file each run: perf_analyzer does not overwrite one
                        runs[tool] = (theirs(pa, env, grpc_url, level, args.input_data, out / f"pa_r{r}_c{level}.json",
                                             args.interval_ms)
                                      if tool == "perf_analyzer" else ours(target, info, level, args.input_data,
                                                                          args.interval_ms))
                    except RuntimeError as exc:
                        print(f"stream_fidelity: round {r + 1} c={level} {tool}: {exc}")
                        return 1
                    figures = ", ".join(f"{k} {runs[tool][k]:.2f}" for k in FIGURES)
                    print(f"round {r + 1} c={level} {tool:<13} {figures}", flush=True)
                for k in FIGURES:
                    ratios[level][k].append(runs["ours"][k] / runs["perf_analyzer"][k])
    print("\nours / perf_analyzer, median over rounds [min-max]:")
    for level in args.levels:
        cells = [f"{k} {statistics.median(v):.3f} [{min(v):.3f}-{max(v):.3f}]" for k, v in ratios[level].items()]
        print(f"  c={level}: " + ", ".join(cells))
    return 0
