"""Synthetic sessions: the events a run would publish, made up from a simple queueing model.

For tests of the recording machinery only: every figure here is invented by the model below,
so nothing built from it may be presented as a measurement.
Closed loop at concurrency c against a server of capacity C images/s with base latency L0:
throughput X = min(c / L0, C) (Little's law below saturation), latency = c / X.
"""

from __future__ import annotations

import random
import uuid as uuidlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from engine.events import (
    AllReduceResult,
    AllReduceRow,
    ClientAudit,
    Event,
    GpuReading,
    GpuSample,
    HostSample,
    LatencyStats,
    LevelResult,
    LevelStarted,
    NetworkPath,
    PhaseChanged,
    ProbeResult,
    ServerBreakdown,
    ServerReady,
    SessionEnded,
    SessionStarted,
    StatSummary,
    SweepFinished,
    Topology,
    WindowResult,
)
from engine.profiles import Hardware, Load, Model, Probe, Profile
from tests.structs import replace


@dataclass
class SyntheticRun:
    gpu_model: str = "RTX 4080"
    gpu_count: int = 4  # GPUs in the box
    variant: str = "4x"  # GPUs the model config uses
    profile_name: str = "4x_rtx4080"
    cost_per_hour: float = 2.0
    model: str = "openclip_vit_b32"
    weights: str | None = None
    batch_size: int = 1
    levels: list[int] = field(default_factory=lambda: [1, 4, 8, 16, 32, 64, 128])
    capacity_per_gpu_ips: float = 200.0
    base_latency_s: float = 0.02
    network_s: float = 0.0005
    window_s: float = 5.0
    windows_per_level: int = 3  # measurement windows (plus one warmup window)
    telemetry_hz: float = 1.0
    probe: bool = True
    t0: float = 1_771_169_400.0  # 2026-02-15T15:30:00Z
    seed: int = 0
    client_bound_from: int | None = None  # concurrency from which the client audit says so
    # images/s the request path carries at most, whatever the GPUs do (None: no such cap); the
    # GPUs' utilisation stays the share of their own capacity they serve
    path_cap_ips: float | None = None
    request_bytes: int = 0  # one request on the wire (LevelResult.network); 0: not recorded
    loop_lag_s: float | None = None  # the client audit's loop lag p99 at client-bound levels
    transport: str = "http"  # load.transport
    mps: bool | None = None  # the embedded server under MPS (ServerReady.mps)
    gpu_processes: list[str] = field(default_factory=list)  # process names NVML lists on each model GPU
    max_batch_size: int = 64
    dataset_size: int | None = None  # probe.dataset_size (the training bill)


def _gpu_count(run: SyntheticRun) -> int:
    return int(run.variant[:-1]) if run.variant.endswith("x") else 1


def _latency(mean: float) -> LatencyStats:
    return LatencyStats(count=0, mean=mean, min=0.7 * mean, p50=0.95 * mean, p90=1.2 * mean,
                        p95=1.3 * mean, p99=1.6 * mean, max=2.0 * mean)


def synthetic_session(run: SyntheticRun | None = None) -> list[Event]:
    """All events of one session, in publication (time) order."""
    run = run or SyntheticRun()
    rng = random.Random(run.seed)
    n = _gpu_count(run)
    capacity = run.capacity_per_gpu_ips * n
    profile = Profile(
        name=run.profile_name,
        hardware=Hardware(gpu_model=run.gpu_model, gpu_count=run.gpu_count, cost_per_hour=run.cost_per_hour),
        model=Model(name=run.model, variant=run.variant, weights=run.weights),
        load=Load(concurrency=list(run.levels), batch_size=run.batch_size, window_ms=int(run.window_s * 1000),
                  transport=run.transport),
        probe=Probe(dataset_size=run.dataset_size),
    )
    uuids = [f"GPU-{uuidlib.UUID(int=rng.getrandbits(128))}" for _ in range(run.gpu_count)]
    t = run.t0
    events: list[Event] = [
        SessionStarted(ts=t, session_id="synthetic", profile_name=run.profile_name, profile=profile.to_dict(),
                       mode="all" if run.probe else "sweep", host={"hostname": "synthetic", "cpu_cores": 32},
                       versions={"gpuscale_tui": "0.1.0", "triton": "2.53.0", "driver": "570.86", "cuda": "12.8",
                                 "torch": "2.6.0"}, tool_version="0.1.0"),
        PhaseChanged(ts=t + 0.1, phase="starting server"),
        ServerReady(ts=t + 2.0, http_url="http://127.0.0.1:8000", metrics_url="http://127.0.0.1:8002/metrics",
                    embedded=True, model=run.model, config_variant=run.variant, triton_version="2.53.0",
                    model_config={"name": run.model, "max_batch_size": run.max_batch_size,
                                  "dynamic_batching": {"max_queue_delay_microseconds": 100},
                                  "instance_group": [{"kind": "KIND_GPU", "count": 1, "gpus": list(range(n))}]},
                    inputs=[{"name": "image", "datatype": "FP32", "shape": [3, 224, 224]}],
                    mps=run.mps, mps_why="synthetic" if run.mps is not None else "", transport=run.transport),
        PhaseChanged(ts=t + 2.1, phase="sweep", detail=f"concurrency sweep on {run.model} over {run.transport}"),
    ]
    t += 3.0
    busy: list[tuple[float, float, float]] = []  # (start, end, utilization fraction)
    for index, c in enumerate(run.levels):
        events.append(LevelStarted(ts=t, mode="concurrency", level=c, index=index, total=len(run.levels),
                                   batch_size=run.batch_size))
        x = min(c / run.base_latency_s, capacity, run.path_cap_ips or capacity) * run.batch_size
        mean = c * run.batch_size / x
        compute = run.base_latency_s * 0.9
        queue = max(mean - compute - run.network_s, 0.0)
        server = ServerBreakdown(request_count=0, inference_count=0, execution_count=0, queue=queue,
                                 compute_input=0.05 * compute, compute_infer=0.9 * compute,
                                 compute_output=0.05 * compute, server_total=queue + compute,
                                 avg_batch_size=max(1.0, min(c / n, 64.0)), client_minus_server=mean - queue - compute)
        client_bound = run.client_bound_from is not None and c >= run.client_bound_from
        audit = ClientAudit(cpu_percent=100.0 if client_bound else 20.0, cpu_cores=32,
                            overhead_fraction=0.6 if client_bound else 0.05, client_bound=client_bound,
                            reasons=["load workers at 100 % CPU"] if client_bound else [],
                            loop_lag_p99=run.loop_lag_s if client_bound else None)
        network = NetworkPath(request_bytes=run.request_bytes) if run.request_bytes else None
        start = t
        for w in range(run.windows_per_level + 1):
            jitter = 1.0 + rng.uniform(-0.02, 0.02)
            requests = int(x * jitter * run.window_s / run.batch_size)
            lat = _latency(mean / jitter)
            lat.count = requests
            events.append(WindowResult(ts=t + run.window_s, level=c, index=w, warmup=w == 0, t_start=t,
                                       t_end=t + run.window_s, requests=requests, errors=0,
                                       throughput_rps=requests / run.window_s,
                                       throughput_ips=requests * run.batch_size / run.window_s,
                                       latency=lat, server=replace(server, request_count=requests), audit=audit,
                                       stable_so_far=w >= 3))
            t += run.window_s
        merged = int(x * run.window_s * run.windows_per_level / run.batch_size)
        lat = _latency(mean)
        lat.count = merged
        events.append(LevelResult(ts=t, mode="concurrency", level=c, index=index, status="stable",
                                  batch_size=run.batch_size, windows=run.windows_per_level,
                                  merged_windows=run.windows_per_level, requests=merged, errors=0,
                                  throughput_rps=x / run.batch_size, throughput_ips=x, latency=lat,
                                  server=replace(server, request_count=merged), audit=audit,
                                  duration_s=t - start, network=network))
        busy.append((start, t, x / capacity))
        t += 0.5
    events.append(SweepFinished(ts=t, levels=len(run.levels), stable=len(run.levels), failed=0))
    if run.probe:
        t = _probe_events(run, events, t, rng)
    t_end = t + 1.0
    events += _telemetry(run, uuids, n, busy, run.t0 + 2.0, t_end, rng)
    events.append(SessionEnded(ts=t_end + 0.5, status="ok"))
    events.sort(key=lambda e: e.ts)
    return events


def _probe_events(run: SyntheticRun, events: list[Event], t: float, rng: random.Random) -> float:
    base = 1000.0
    for world in sorted({1, 2, 4, run.gpu_count} & set(range(1, run.gpu_count + 1))):
        eff = 1.0 if world == 1 else 0.97 - 0.03 * world
        rate = base * world * eff
        t += 20.0
        events.append(ProbeResult(
            ts=t, model="mlp_6.9m", params=6_900_000, strategy="single" if world == 1 else "ddp",
            scaling="weak", world_size=world, per_device_batch=32, global_batch=32 * world, device="cuda",
            backend="nccl", precision="bf16",
            samples_per_s=StatSummary(mean=rate, ci_low=rate * 0.98, ci_high=rate * 1.02, n=3, std=rate * 0.01),
            step_time_s=StatSummary(mean=32 * world / rate, ci_low=None, ci_high=None, n=3),
            speedup=rate / base, efficiency=eff, comm_overhead=0.0 if world == 1 else 0.02 * world,
            peak_mem_bytes=[2_000_000_000] * world, gpu_util=[90.0] * world, warmup_steps=5, steps=30, repeats=3,
            p_value=None if world == 1 else 0.001, significant=None if world == 1 else True))
    if run.gpu_count > 1:
        t += 10.0
        rows = []
        for k in range(10, 31, 4):
            size = 1 << k
            algbw = 100.0 * size / (size + (1 << 22))
            rows.append(AllReduceRow(size_bytes=size, time_s=size / (algbw * 1e9), algbw_gbps=algbw,
                                     busbw_gbps=algbw * 2 * (run.gpu_count - 1) / run.gpu_count))
        events.append(AllReduceResult(ts=t, world_size=run.gpu_count, backend="nccl", device="cuda", rows=rows,
                                      link="PCIe Gen4 x16"))
        events.append(Topology(ts=run.t0 + 2.5, gpus=[{"index": i} for i in range(run.gpu_count)],
                               summary=f"{run.gpu_count}x {run.gpu_model}, PCIe"))
    return t


def _telemetry(run: SyntheticRun, uuids: list[str], n: int, busy: list[tuple[float, float, float]],
               t_start: float, t_end: float, rng: random.Random) -> list[Event]:
    out: list[Event] = []
    step = 1.0 / run.telemetry_hz
    t = t_start
    k = 0
    while t < t_end:
        load = next((u for s, e, u in busy if s <= t <= e), 0.0)
        gpus = [
            GpuReading(uuid=u, index=i, source="nvml", name=f"NVIDIA {run.gpu_model}",
                       util_gpu=round(min(100.0, 95.0 * load + rng.uniform(0, 3)), 1) if i < n else 0.0,
                       util_mem=round(40.0 * load, 1), mem_used=3_000_000_000 if i < n else 500_000_000,
                       mem_total=16_000_000_000, power_w=round(50 + 250 * load, 1), power_limit_w=320.0,
                       temp_c=40 + 30 * load, sm_clock_mhz=2500.0, pcie_gen=4, pcie_width=16,
                       processes=[{"pid": 1000 * (i + 1) + j, "name": name, "mem_used": 1 << 30}
                                  for j, name in enumerate(run.gpu_processes)] if i < n else [])
            for i, u in enumerate(uuids)
        ]
        out.append(GpuSample(ts=t, gpus=gpus, source="nvml", interval_s=step))
        out.append(HostSample(ts=t + 0.01, cpu_percent=round(10 + 30 * load, 1), mem_used=20_000_000_000,
                              mem_total=128_000_000_000, own_cpu_percent=round(5 + 20 * load, 1)))
        k += 1
        t = t_start + k * step
    return out


def record_events(path: Path, events: Iterable[Event]) -> Path:
    """Write events through a real Recorder (as a live session would) and close it."""
    from engine.record.recorder import Recorder

    recorder = Recorder(path)
    try:
        for event in events:
            recorder(event)
    finally:
        recorder.close()
    return Path(path)


def make_recording(directory: Path, name: str = "run.sqlite", run: SyntheticRun | None = None) -> Path:
    """A synthetic session recorded at ``directory / name``."""
    return record_events(directory / name, synthetic_session(run))
