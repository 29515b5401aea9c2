"""Our engine's transports against perf_analyzer's, same server, in one run.

For each config variant the embedded server starts once; at each level our engine with
load.transport = http | system_shm | cuda_shm | grpc and perf_analyzer 2.41 with --shared-memory
none | system | cuda, or -i grpc, run in alternation (the order flips every round). Per run: images/s, p50,
p99, GPU busy % (NVML, mean and per GPU the variant uses), and ours / perf_analyzer; with
--instance-timing, where each GPU's batches spent their time (the ViT's execute_clock.py). At
the end, each tool's scaling efficiency per transport: peak_N / (N x peak_1x). `--mps off|on`
runs the server without or with its MPS daemon, for an A/B of the two.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from bench.common import ROOT, GpuBusy, out_dir, stamp
from bench.tools import Measure, SetupError, ensure_perf_analyzer, run_ours, run_perf_analyzer

EMBEDDED = str(ROOT / "model_repository" / "embedded")
PA_SHM = {"http": [], "system_shm": ["--shared-memory", "system"], "cuda_shm": ["--shared-memory", "cuda"], "grpc": []}
PA_PROTOCOL = {"grpc": "grpc"}  # perf_analyzer's -i for our transport (else http)


def instance_snapshots(directory: Path | None) -> dict[str, dict]:
    """The embedded ViT's per-instance timing files (execute_clock.py), by file name."""
    if directory is None or not directory.is_dir():
        return {}
    out = {}
    for path in directory.glob("*.json"):
        try:
            out[path.name] = json.loads(path.read_text())
        except (OSError, ValueError):  # being replaced right now: the next snapshot has it
            continue
    return out


def instance_timing(before: dict[str, dict], after: dict[str, dict]) -> dict[str, dict[str, float]]:
    """Per GPU (device string), mean µs per batch of each execute section over its instances,
    and the batches and images they ran, between two sets of snapshots."""
    if EMBEDDED not in sys.path:
        sys.path.insert(0, EMBEDDED)  # the ViT's own timing module
    from execute_clock import per_batch_us

    by_device: dict[str, list[dict[str, float]]] = {}
    for name, snap in after.items():
        delta = per_batch_us(before.get(name), snap)
        if delta["batches"]:
            by_device.setdefault(snap["device"], []).append(delta)
    out = {}
    for device, rows in sorted(by_device.items()):
        batches = sum(r["batches"] for r in rows)
        merged = {k: sum(r[k] * r["batches"] for r in rows) / batches for k in rows[0] if k.endswith("_us")}
        merged.update(instances=len(rows), batches=batches, images=sum(r["images"] for r in rows),
                      inputs_elsewhere=sum(r["inputs_elsewhere"] for r in rows),
                      requests=sum(r["requests"] for r in rows))
        out[device] = merged
    return out


def timing_line(timing: dict[str, dict[str, float]]) -> str:
    parts = []
    for device, t in timing.items():
        sections = " ".join(f"{k[:-3]} {v:.0f}" for k, v in t.items() if k.endswith("_us"))
        parts.append(f"{device} x{t['instances']:.0f}: {t['batches']:.0f} batches, {t['images'] / t['batches']:.0f} img/batch,"
                     f" {t['inputs_elsewhere']:.0f}/{t['requests']:.0f} inputs on another GPU; us/batch {sections}")
    return "\n      ".join(parts)


def _fmt(x: float | None, spec: str) -> str:
    return format(x, spec) if x is not None else "n/a"


def one_run(tool: str, pa: tuple[Path, dict[str, str]], url: str, level: int, transport: str, gpus: tuple[int, ...],
            timing_dir: Path | None, args: argparse.Namespace) -> Measure:
    """One tool at one level over one transport, with the GPUs' busy % and instance timings."""
    snapshots = instance_snapshots(timing_dir)
    with GpuBusy(gpus) as busy:
        if tool == "pa":
            m = run_perf_analyzer(pa, url, args.model, level, args, extra=PA_SHM[transport],
                                  protocol=PA_PROTOCOL.get(transport, "http"))
        else:
            m = run_ours(url, args.model, level, args, transport=transport, gpus=gpus)
    m.extra["gpu_busy"] = busy.mean()
    m.extra["gpu_busy_each"] = busy.each()
    if timing_dir:
        m.extra["instance_timing"] = instance_timing(snapshots, instance_snapshots(timing_dir))
    return m


def print_summary(rows: list[dict], transports: list[str]) -> None:
    print("\nsummary: peak images/s per tool, transport and variant; efficiency = peak_N / (N x peak_1x)")
    for tool in ("ours", "perf_analyzer"):
        for transport in transports:
            peaks: dict[str, float] = {}
            for r in rows:
                if r["transport"] == transport and r[tool]["throughput"]:
                    peaks[r["variant"]] = max(peaks.get(r["variant"], 0.0), r[tool]["throughput"])
            base = peaks.get("1x")
            parts = [f"{v} {x:,.0f}" + (f" ({x / (int(v[:-1]) * base):.0%})" if base and v != "1x" and v[:-1].isdigit() else "")
                     for v, x in peaks.items()]
            print(f"  {tool:<14}{transport:<11}" + "   ".join(parts))


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0],
        epilog="Fits: 2x H200, one 10-minute device call (on 4x: --variants 1x,2x,4x):\n"
               "  python -m bench transports --variants 1x,2x --levels 256 --rounds 3 --window-ms 800 --max-windows 4\n"
               "  32 images per request: --transports cuda_shm --batch 32 --levels 48 --instance-timing /tmp/timing\n"
               "On this box: --model vit_tiny --variants cpu --transports http,system_shm --levels 4.")
    p.add_argument("--model", default="openclip_vit_b32")
    p.add_argument("--variants", default="1x,2x", help="config variants, each on a fresh server")
    p.add_argument("--transports", default="http,system_shm,cuda_shm")
    p.add_argument("--levels", default="256", help="concurrency levels")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--window-ms", type=int, default=1500)
    p.add_argument("--max-windows", type=int, default=5)
    p.add_argument("--stability", type=float, default=10.0, help="percent")
    p.add_argument("--batch", type=int, default=1, help="images per request (perf_analyzer -b); figures are images/s either way")
    p.add_argument("--instance-timing", type=Path, default=None,
                   help="directory: the ViT's instances time their executes (GPUSCALE_VIT_TIMING) and each run"
                        " prints where a batch's time went, per GPU")
    p.add_argument("--mps", default="auto", choices=("auto", "on", "off"), help="the embedded server's server.mps")
    return p


def run(args: argparse.Namespace) -> int:
    transports = [t for t in args.transports.split(",") if t]
    unknown = [t for t in transports if t not in PA_SHM]
    try:
        levels = [int(x) for x in args.levels.split(",") if x.strip()]
    except ValueError:
        levels = []
    if unknown or not levels or args.rounds < 1:
        why = f"unknown transport {unknown[0]!r} ({', '.join(PA_SHM)})" if unknown else "--levels and --rounds must be integers > 0"
        print(f"transports: {why}", file=sys.stderr)
        return 2
    try:
        pa = ensure_perf_analyzer()
    except SetupError as exc:
        print(f"transports: {exc}", file=sys.stderr)
        return 2
    from engine.server.embedded import EmbeddedServer

    rows = []
    for variant in args.variants.split(","):
        timing_dir = args.instance_timing / variant if args.instance_timing else None
        if timing_dir:  # the server's environment, and so its stubs', is copied from ours at start
            os.environ["GPUSCALE_VIT_TIMING"] = str(timing_dir)
        try:
            with tempfile.TemporaryDirectory() as logs, EmbeddedServer(
                    model=args.model, variant=variant, log_dir=Path(logs), mps=args.mps) as srv:
                gpus = tuple(srv.prepared.gpus) if srv.prepared else ()
                print(f"== {args.model} {variant} at {srv.http_url}, GPUs {gpus}, {args.batch} image(s) per request,"
                      f" MPS {'on' if srv.mps_used else 'off'} ({srv.mps_why})", flush=True)
                for level in levels:
                    for transport in transports:
                        for rnd in range(args.rounds):
                            order = ["pa", "ours"] if rnd % 2 == 0 else ["ours", "pa"]
                            got = {tool: one_run(tool, pa, srv.http_url, level, transport, gpus, timing_dir, args) for tool in order}
                            ours, theirs = got["ours"], got["pa"]
                            ratio = ours.throughput / theirs.throughput if ours.throughput and theirs.throughput else None
                            rows.append({"variant": variant, "level": level, "transport": transport, "round": rnd, "batch": args.batch,
                                         "mps": srv.mps_used, "ours": asdict(ours), "perf_analyzer": asdict(theirs),
                                         "throughput_ratio": ratio})
                            print(f"  {variant} c={level:<4} {transport:<10} r{rnd}  ours {_fmt(ours.throughput, '7.0f')}"
                                  f" ({_fmt(ours.p50_ms, '.1f')}/{_fmt(ours.p99_ms, '.1f')} ms, gpu {_fmt(ours.extra.get('gpu_busy'), '.0f')} %)"
                                  f"  pa {_fmt(theirs.throughput, '7.0f')} ({_fmt(theirs.p50_ms, '.1f')}/{_fmt(theirs.p99_ms, '.1f')} ms,"
                                  f" gpu {_fmt(theirs.extra.get('gpu_busy'), '.0f')} %)  ratio {_fmt(ratio, '.2f')}"
                                  f"  [{ours.status}; pa {theirs.status}]"
                                  f"  busy per GPU ours {ours.extra.get('gpu_busy_each')} pa {theirs.extra.get('gpu_busy_each')}", flush=True)
                            for name, m in (("ours", ours), ("pa", theirs)):
                                if m.extra.get("instance_timing"):
                                    print(f"    {name}: {timing_line(m.extra['instance_timing'])}", flush=True)
        except Exception as exc:  # noqa: BLE001 - e.g. a variant needing more GPUs than here: the next one runs
            print(f"== {variant}: {type(exc).__name__}: {exc}", flush=True)
    print_summary(rows, transports)
    path = out_dir() / f"transports-{stamp()}.json"
    path.write_text(json.dumps(rows, indent=1, default=str))
    print(f"written: {path}")
    return 0 if rows else 1
