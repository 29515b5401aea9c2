"""The real-GPU check of the telemetry engine (run by the lead on a lent multi-GPU box).

    python tests/engine/telemetry/gpu_run.py --out "$OUT"

What it does, all real: starts ``python -m engine.telemetry`` (NVML, 0.5 s interval), lets it
see the GPUs idle, then loads every GPU for --load-seconds with torch worker processes (NCCL
all-reduce of 256 MiB — NVLink or PCIe P2P traffic —, a bf16 matmul, and pinned host<->device
copies — PCIe traffic), then idle again, stops the sampler and compares what telemetry saw
with what the workers did: utilization and power up under load, NVLink TX against the bytes
a ring all-reduce must send, PCIe traffic against the bytes copied, our processes listed.
Writes telemetry.jsonl (every event) and verdict.txt to --out; exit 1 when a check fails.
Needs torch with CUDA, nvidia-ml-py and psutil; not pytest, textual or tritonclient.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ALLREDUCE_ELEMS = 64 << 20  # fp32: 256 MiB per all-reduce
COPY_ELEMS = 32 << 20  # fp32: 128 MiB each way per iteration


def _worker(rank: int, world: int, port: int, seconds: float, queue, elems: tuple[int, int, int]) -> None:
    """One load process per GPU (spawned). On a machine without CUDA (the --cpu dry run of
    this script's mechanics) the same loop runs on CPU with gloo and small tensors."""
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    allreduce_elems, copy_elems, matmul_n = elems
    if cuda:
        torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if world > 1:
        dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    x = torch.ones(allreduce_elems, device=dev)
    a = torch.randn(matmul_n, matmul_n, device=dev, dtype=torch.bfloat16 if cuda else torch.float32)
    host = torch.empty(copy_elems, pin_memory=cuda)
    chunk = x[:copy_elems]
    if world > 1:  # warm up the communicators outside the measured loop
        dist.all_reduce(x)
        dist.barrier()
    sync()
    iters = 0
    start = time.time()
    while time.time() - start < seconds:
        if world > 1:
            dist.all_reduce(x)
            x.mul_(1.0 / world)
        for _ in range(4):
            a @ a
        host.copy_(chunk, non_blocking=cuda)
        chunk.copy_(host, non_blocking=cuda)
        sync()
        iters += 1
    end = time.time()
    queue.put({"rank": rank, "pid": os.getpid(), "start": start, "end": end, "iters": iters,
               "allreduce_bytes": allreduce_elems * 4, "copy_bytes": copy_elems * 4, "world": world})
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _fmt(v: float | None, scale: float = 1.0, unit: str = "") -> str:
    return "n/a" if v is None else f"{v / scale:.2f}{unit}"


def run_load(args: argparse.Namespace, out: Path) -> dict:
    """Telemetry CLI in the background; idle, load on every GPU, idle. Returns when the load
    processes were spawned and what each of them did."""
    import torch
    import torch.multiprocessing as mp

    cuda = torch.cuda.is_available()
    world = torch.cuda.device_count() if cuda else args.cpu_world
    elems = (ALLREDUCE_ELEMS, COPY_ELEMS, 8192) if cuda else (1 << 20, 1 << 18, 256)
    with open(out / "telemetry.jsonl", "w") as sink, open(out / "telemetry_summary.txt", "w") as summary:
        tele = subprocess.Popen(
            [sys.executable, "-m", "engine.telemetry", "--seconds", "3600", "--nvml-interval", str(args.interval),
             "--host-interval", str(args.interval)],
            cwd=ROOT, stdout=sink, stderr=summary,
        )
        try:
            time.sleep(args.idle_seconds)
            queue = mp.get_context("spawn").SimpleQueue()
            spawned_at = time.time()
            mp.spawn(_worker, args=(world, _free_port(), args.load_seconds, queue, elems), nprocs=world, join=True)
            runs = [queue.get() for _ in range(world)]
            time.sleep(args.idle_seconds)
        finally:
            tele.send_signal(signal.SIGTERM)
            tele.wait(30)
    record = {"spawned_at": spawned_at, "runs": sorted(runs, key=lambda r: r["rank"])}
    (out / "runs.json").write_text(json.dumps(record, indent=1))
    return record


def analyse(events: list[dict], record: dict, interval: float) -> tuple[list[str], list[tuple[bool, str]]]:
    """Compare what telemetry saw with what the workers did. Pure: events and runs in, text out."""
    runs = record["runs"]
    world = len(runs)
    topo = next((e for e in events if e["kind"] == "topology"), None)
    samples = [e for e in events if e["kind"] == "gpu_sample" and e["source"] == "nvml"]
    load_start = max(r["start"] for r in runs) + 1.0  # leave the edges out: samples average
    load_end = min(r["end"] for r in runs) - 1.0
    idle_end = record["spawned_at"] - 0.5  # before any load process existed
    worker_pids = {r["pid"] for r in runs}

    checks: list[tuple[bool, str]] = []

    def check(ok: bool, text: str) -> None:
        checks.append((bool(ok), text))

    check(topo is not None and len(topo["gpus"]) == world, f"topology for {world} GPUs: {topo and topo['summary']}")
    nvlink_up = bool(topo) and any(g.get("nvlink_links_up") for g in topo["gpus"])
    under_load = [e for e in samples if load_start <= e["ts"] <= load_end]
    expected = max(0.0, load_end - load_start) / interval
    check(len(under_load) >= expected * 0.8,
          f"sampler kept pace under load: {len(under_load)} NVML samples in {load_end - load_start:.1f} s at {interval} s")

    lines = []
    for g in (topo["gpus"] if topo else []):
        uuid = g["uuid"]
        rank = g["index"]
        run = next((r for r in runs if r["rank"] == rank), None)

        def series(field: str, lo: float, hi: float, uuid: str = uuid) -> list[float]:
            return [r[field] for s in samples if lo <= s["ts"] <= hi for r in s["gpus"]
                    if r["uuid"] == uuid and r[field] is not None]

        idle_lo = samples[0]["ts"] if samples else 0.0
        util_idle, util_load = _mean(series("util_gpu", idle_lo, idle_end)), _mean(series("util_gpu", load_start, load_end))
        pw_idle, pw_load = _mean(series("power_w", idle_lo, idle_end)), _mean(series("power_w", load_start, load_end))
        mem_idle, mem_load = _mean(series("mem_used", idle_lo, idle_end)), _mean(series("mem_used", load_start, load_end))
        nv_tx, nv_rx = _mean(series("nvlink_tx_bps", load_start, load_end)), _mean(series("nvlink_rx_bps", load_start, load_end))
        pcie_tx, pcie_rx = _mean(series("pcie_tx_bps", load_start, load_end)), _mean(series("pcie_rx_bps", load_start, load_end))
        pcie_idle = _mean(series("pcie_rx_bps", idle_lo, idle_end))
        procs = {p["pid"] for s in samples if load_start <= s["ts"] <= load_end for r in s["gpus"] if r["uuid"] == uuid
                 for p in r["processes"]}
        energy = series("energy_j", idle_lo, samples[-1]["ts"] if samples else 0.0)
        lines.append(
            f"GPU {rank} {g['name']}: util idle/load {_fmt(util_idle)}/{_fmt(util_load)} %, power {_fmt(pw_idle)}/{_fmt(pw_load)} W, "
            f"mem {_fmt(mem_idle, 2**30)}/{_fmt(mem_load, 2**30)} GiB, NVLink tx/rx {_fmt(nv_tx, 1e9)}/{_fmt(nv_rx, 1e9)} GB/s, "
            f"PCIe tx/rx {_fmt(pcie_tx, 1e9)}/{_fmt(pcie_rx, 1e9)} GB/s (idle rx {_fmt(pcie_idle, 1e9)}), processes {sorted(procs)}"
        )
        check(util_load is not None and util_load >= 50 and (util_idle is None or util_load > util_idle),
              f"GPU {rank}: utilization rises under load ({_fmt(util_idle)} -> {_fmt(util_load)} %)")
        check(pw_load is not None and pw_idle is not None and pw_load > pw_idle,
              f"GPU {rank}: power rises under load ({_fmt(pw_idle)} -> {_fmt(pw_load)} W)")
        check(mem_load is not None and mem_idle is not None and mem_load - mem_idle > (256 << 20),
              f"GPU {rank}: memory used rises by the workers' buffers")
        check(len(energy) >= 2 and energy[-1] > energy[0], f"GPU {rank}: energy counter advances")
        check(bool(procs), f"GPU {rank}: running processes listed during load (workers {sorted(worker_pids)}; "
                           f"{'same pids' if procs & worker_pids else 'other pid namespace or missing'})")
        if run is not None:
            elapsed = run["end"] - run["start"]
            copied = run["iters"] * run["copy_bytes"] / elapsed  # bytes/s each way
            ratio = (pcie_rx / copied) if pcie_rx is not None else None
            check(ratio is not None and 0.1 <= ratio <= 10,
                  f"GPU {rank}: PCIe rx {_fmt(pcie_rx, 1e9)} GB/s vs host->device copies {copied / 1e9:.2f} GB/s "
                  f"(ratio {_fmt(ratio)}; NVML samples 20 ms windows)")
            if world > 1 and nvlink_up:
                ring = run["iters"] * run["allreduce_bytes"] * 2 * (world - 1) / world / elapsed
                ratio = (nv_tx / ring) if nv_tx is not None else None
                check(ratio is not None and 0.25 <= ratio <= 4,
                      f"GPU {rank}: NVLink tx {_fmt(nv_tx, 1e9)} GB/s vs ring all-reduce traffic {ring / 1e9:.2f} GB/s "
                      f"(ratio {_fmt(ratio)}; NVLS/tree algorithms send less than a ring)")

    return lines, checks


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--idle-seconds", type=float, default=5.0)
    ap.add_argument("--load-seconds", type=float, default=20.0)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--cpu-world", type=int, default=2, help="processes for the CPU dry run (no CUDA)")
    ap.add_argument("--analyse-only", action="store_true", help="re-read telemetry.jsonl and runs.json in --out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.analyse_only:
        record = json.loads((out / "runs.json").read_text())
    else:
        record = run_load(args, out)
        print((out / "telemetry_summary.txt").read_text(), file=sys.stderr)
    events = [json.loads(line) for line in (out / "telemetry.jsonl").read_text().splitlines() if line.strip()]
    lines, checks = analyse(events, record, args.interval)
    warnings = [e["message"] for e in events if e["kind"] == "warning"]
    verdict = ["", *lines, ""]
    verdict += [f"{'PASS' if ok else 'FAIL'}  {text}" for ok, text in checks]
    verdict += [f"warning: {w}" for w in warnings]
    verdict += [f"worker runs: {record['runs']}"]
    text = "\n".join(verdict)
    print(text)
    (out / "verdict.txt").write_text(text + "\n")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
