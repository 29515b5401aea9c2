"""Our engine's transports against perf_analyzer's, same server, in one run (issue 14).

For each config variant the embedded server is started once; at each level our engine with
load.transport = http | system_shm | cuda_shm and perf_analyzer 2.41 with --shared-memory
none | system | cuda run in alternation (the order flips every round). Per run: images/s, p50,
p99, GPU busy % (NVML, mean over the GPUs the variant uses), and ours / perf_analyzer. At the
end, each tool's scaling efficiency per transport: peak_N / (N x peak_1x).

    python bench/transport_vs_perf_analyzer.py --variants 1x,2x --levels 256 --rounds 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load_pa_setup import ensure_perf_analyzer  # noqa: E402
from bench.load_vs_perf_analyzer import Measure, RunAccount, _ours_measure, run_perf_analyzer  # noqa: E402
from engine.load.sweep import run_sweep  # noqa: E402
from engine.load.target import Target, describe_target  # noqa: E402
from engine.profiles import Load  # noqa: E402

sys.path.insert(0, str(ROOT / "model_repository" / "embedded"))  # the ViT's own timing module
from execute_clock import per_batch_us  # noqa: E402


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


PA_SHM = {"http": [], "system_shm": ["--shared-memory", "system"], "cuda_shm": ["--shared-memory", "cuda"]}


class GpuBusy(threading.Thread):
    """NVML utilization of some GPUs while a run lasts, mean and per GPU (None without NVML)."""

    def __init__(self, gpus: tuple[int, ...]) -> None:
        super().__init__(daemon=True)
        self.gpus, self.stop = gpus, threading.Event()
        self.per_gpu: list[list[int]] = [[] for _ in gpus]

    def run(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in self.gpus]
        except Exception:  # noqa: BLE001 - no NVML here: no figure
            return
        while not self.stop.wait(0.25):
            for seen, h in zip(self.per_gpu, handles, strict=True):
                seen.append(pynvml.nvmlDeviceGetUtilizationRates(h).gpu)

    def mean(self) -> float | None:
        """Mean over every sample of every GPU (each GPU has the same number of samples)."""
        values = [v for seen in self.per_gpu for v in seen]
        return sum(values) / len(values) if values else None

    def each(self) -> list[float]:
        """Mean busy % of each GPU, in the order of ``gpus`` (GPU 0 holds cuda_shm's inputs)."""
        return [round(sum(v) / len(v), 1) for v in self.per_gpu if v]


async def run_ours(url: str, model: str, level: int, transport: str, gpus: tuple[int, ...], args) -> Measure:
    target = Target(url, model)
    info = await describe_target(target)
    load = Load(concurrency=[level], window_ms=args.window_ms, stability_percent=args.stability,
                max_windows=args.max_windows, warmup_s=0.0, transport=transport, batch_size=args.batch)
    with RunAccount(url, model, "engine.load.worker", include_self=True) as acct:
        (r,) = await run_sweep(target, info, load, lambda e: None, asyncio.Event(), gpus=gpus)
    return acct.fill(_ours_measure(r))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="openclip_vit_b32")
    p.add_argument("--variants", default="1x,2x")
    p.add_argument("--transports", default="http,system_shm,cuda_shm")
    p.add_argument("--levels", default="256")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--window-ms", type=int, default=1500)
    p.add_argument("--max-windows", type=int, default=5)
    p.add_argument("--stability", type=float, default=10.0)
    p.add_argument("--batch", type=int, default=1,
                   help="images per request (perf_analyzer -b); figures are images/s either way")
    p.add_argument("--instance-timing", type=Path, default=None,
                   help="directory: the ViT's instances time their executes (GPUSCALE_VIT_TIMING) and each run"
                        " prints where a batch's time went, per GPU")
    p.add_argument("--mps", default="auto", choices=("auto", "on", "off"),
                   help="the embedded server's server.mps (engine/server/mps.py); default auto, as the tool")
    args = p.parse_args()
    binary, env = ensure_perf_analyzer()
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
                for level in (int(x) for x in args.levels.split(",")):
                    for transport in args.transports.split(","):
                        for rnd in range(args.rounds):
                            order = ["pa", "ours"] if rnd % 2 == 0 else ["ours", "pa"]
                            got = {}
                            for tool in order:
                                busy = GpuBusy(gpus)
                                snapshots = instance_snapshots(timing_dir)
                                busy.start()
                                if tool == "pa":
                                    args.pa_extra = PA_SHM[transport]
                                    m = run_perf_analyzer(binary, env, srv.http_url, args.model, level, args)
                                else:
                                    try:
                                        m = asyncio.run(run_ours(srv.http_url, args.model, level, transport, gpus, args))
                                    except Exception as exc:  # noqa: BLE001 - a bench reports, it does not stop
                                        m = Measure("ours", False, f"failed: {type(exc).__name__}: {exc}"[:160])
                                busy.stop.set()
                                busy.join()
                                m.extra["gpu_busy"] = busy.mean()
                                m.extra["gpu_busy_each"] = busy.each()
                                if timing_dir:
                                    m.extra["instance_timing"] = instance_timing(snapshots, instance_snapshots(timing_dir))
                                got[tool] = m
                            ours, pa = got["ours"], got["pa"]
                            ratio = ours.throughput / pa.throughput if ours.throughput and pa.throughput else None
                            rows.append({"variant": variant, "level": level, "transport": transport, "round": rnd, "batch": args.batch,
                                         "mps": srv.mps_used,
                                         "ours": asdict(ours), "perf_analyzer": asdict(pa), "throughput_ratio": ratio})
                            fmt = lambda x, s: format(x, s) if x is not None else "n/a"  # noqa: E731
                            print(f"  {variant} c={level:<4} {transport:<10} r{rnd}  ours {fmt(ours.throughput, '7.0f')}"
                                  f" ({fmt(ours.p50_ms, '.1f')}/{fmt(ours.p99_ms, '.1f')} ms, gpu {fmt(ours.extra.get('gpu_busy'), '.0f')} %)"
                                  f"  pa {fmt(pa.throughput, '7.0f')} ({fmt(pa.p50_ms, '.1f')}/{fmt(pa.p99_ms, '.1f')} ms,"
                                  f" gpu {fmt(pa.extra.get('gpu_busy'), '.0f')} %)  ratio {fmt(ratio, '.2f')}"
                                  f"  [{ours.status}; pa {pa.status}]"
                                  f"  busy per GPU ours {ours.extra.get('gpu_busy_each')} pa {pa.extra.get('gpu_busy_each')}", flush=True)
                            for tool_name, m in (("ours", ours), ("pa", pa)):
                                if m.extra.get("instance_timing"):
                                    print(f"    {tool_name}: {timing_line(m.extra['instance_timing'])}", flush=True)
        except Exception as exc:  # noqa: BLE001 - e.g. a variant needing more GPUs than here
            print(f"== {variant}: {type(exc).__name__}: {exc}", flush=True)
    print("\nsummary: peak images/s per tool, transport and variant; efficiency = peak_N / (N x peak_1x)")
    for tool in ("ours", "perf_analyzer"):
        for transport in args.transports.split(","):
            peaks = {}
            for r in rows:
                if r["transport"] == transport and r[tool]["throughput"]:
                    peaks[r["variant"]] = max(peaks.get(r["variant"], 0.0), r[tool]["throughput"])
            base = peaks.get("1x")
            parts = [f"{v} {x:,.0f}" + (f" ({x / (int(v[:-1]) * base):.0%})" if base and v != "1x" and v.endswith("x") else "")
                     for v, x in peaks.items()]
            print(f"  {tool:<14}{transport:<11}" + "   ".join(parts))
    out = Path(os.environ.get("OUT", ROOT / "bench" / "out"))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"transport_vs_perf_analyzer-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
