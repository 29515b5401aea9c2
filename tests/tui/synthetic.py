"""Deterministic synthetic sessions for the TUI's unit and snapshot tests.

The numbers are test inputs with a fixed clock (T0), shaped like a real sweep: they exercise
rendering, not the measurement, and are never presented as results.
"""

from __future__ import annotations

from engine import events as ev

T0 = 1_700_000_000.0


def profile(gpu_count: int = 4, cost_per_hour: float = 1.2, dataset_size: int | None = None) -> dict:
    probe: dict = {"enabled": True} if dataset_size is None else {"enabled": True, "dataset_size": dataset_size}
    return {
        "name": "4x_rtx4080",
        "hardware": {"gpu_model": "RTX 4080", "gpu_count": gpu_count, "cost_per_hour": cost_per_hour},
        "server": {"kind": "embedded"},
        "model": {"name": "openclip_vit_b32", "variant": f"{gpu_count}x" if gpu_count else "cpu"},
        "load": {
            "mode": "concurrency",
            "concurrency": [1, 4, 8, 16],
            "window_ms": 2000,
            "warmup_s": 1.0,
            "stable_windows": 3,
            "max_windows": 6,
        },
        "probe": probe,
    }


def latency(scale: float) -> ev.LatencyStats:
    return ev.LatencyStats(
        count=100, mean=scale * 1.1, min=scale * 0.6, p50=scale, p90=scale * 1.5, p95=scale * 1.7,
        p99=scale * 2.2, max=scale * 3.0,
    )


def breakdown(queue: float, compute: float, batch: float) -> ev.ServerBreakdown:
    return ev.ServerBreakdown(
        request_count=100, inference_count=100, execution_count=int(100 / batch), queue=queue,
        compute_input=compute * 0.1, compute_infer=compute * 0.8, compute_output=compute * 0.1,
        server_total=queue + compute, avg_batch_size=batch, client_minus_server=0.0004,
    )


def gpu_sample(t: float, n_gpus: int, load: float) -> ev.GpuSample:
    readings = [
        ev.GpuReading(
            uuid=f"GPU-{i:04d}-abcd", index=i, source="nvml", name="NVIDIA GeForce RTX 4080",
            util_gpu=min(100.0, load * (90 - 3 * i)), mem_used=int((4 + i) * 2**30),
            mem_total=16 * 2**30, power_w=80 + load * (220 - 5 * i), power_limit_w=320.0, temp_c=45 + 20 * load,
        )
        for i in range(n_gpus)
    ]
    return ev.GpuSample(gpus=readings, source="nvml", interval_s=1.0, ts=T0 + t)


def session_events(
    n_gpus: int = 4,
    levels: tuple[int, ...] = (1, 4, 8, 16),
    finish_levels: int | None = None,
    probe: bool = True,
    end: bool = True,
    cost_per_hour: float = 1.2,
    dataset_size: int | None = None,
) -> list[ev.Event]:
    """A sweep over ``levels``; ``finish_levels`` < len(levels) stops mid-sweep (a live view)."""
    finish = len(levels) if finish_levels is None else finish_levels
    out: list[ev.Event] = [
        ev.SessionStarted(
            session_id="20240101-000000-test", profile_name="4x_rtx4080",
            profile=profile(n_gpus, cost_per_hour, dataset_size), mode="all", host={"hostname": "box"}, ts=T0,
        ),
        ev.PhaseChanged(phase="starting server", ts=T0 + 0.5),
        ev.ServerReady(
            http_url="http://127.0.0.1:8000", metrics_url="http://127.0.0.1:8002/metrics", embedded=True,
            model="openclip_vit_b32", config_variant=f"{n_gpus}x", triton_version="2.59.0", ts=T0 + 3.0,
        ),
        ev.PhaseChanged(phase="sweep", detail=f"{len(levels)} concurrency levels", ts=T0 + 3.1),
    ]
    t = 4.0
    for index, level in enumerate(levels):
        out.append(ev.LevelStarted(mode="concurrency", level=level, index=index, total=len(levels), workers=2, ts=T0 + t))
        base = 2.0 + 0.9 * level  # ms: grows with queueing
        ips = min(level * 180.0, 1500.0)
        queue_s = max(0.0, (base - 2.5) / 1000 * 0.7)
        windows = 4 if index < finish else 2
        for w in range(windows):
            t += 2.0
            out.append(gpu_sample(t - 1.0, n_gpus, min(1.0, level / 10)))
            out.append(ev.HostSample(cpu_percent=20.0 + level, mem_used=9 * 2**30, mem_total=24 * 2**30,
                                     own_cpu_percent=5.0 + level / 2, ts=T0 + t - 0.5))
            audit = ev.ClientAudit(cpu_percent=30.0 + level * 4, cpu_cores=16)
            if level >= 16:
                audit = ev.ClientAudit(cpu_percent=180.0, cpu_cores=2, client_bound=True,
                                       reasons=["client CPU 90% of its cores"])
            out.append(ev.WindowResult(
                level=level, index=w, warmup=w == 0, t_start=T0 + t - 2.0, t_end=T0 + t,
                requests=int(ips * 2), errors=0, throughput_rps=ips * (1 + 0.01 * w), throughput_ips=ips * (1 + 0.01 * w),
                latency=latency(base / 1000), server=breakdown(queue_s, 0.0016, min(level, 8) * 0.9),
                audit=audit, stable_so_far=w >= 3, ts=T0 + t,
            ))
        if index < finish:
            t += 0.1
            status = "unstable" if level == 8 else "stable"
            out.append(ev.LevelResult(
                mode="concurrency", level=level, index=index, status=status, batch_size=1, windows=3,
                merged_windows=3, requests=int(ips * 6), errors=0, throughput_rps=ips, throughput_ips=ips,
                latency=latency(base / 1000), server=breakdown(queue_s, 0.0016, min(level, 8) * 0.9),
                audit=out[-1].audit, duration_s=8.1, ts=T0 + t,  # type: ignore[attr-defined]  # out[-1] is a WindowResult here
            ))
        else:
            break
    if finish < len(levels):
        return out
    out.append(ev.SweepFinished(levels=len(levels), stable=len(levels) - 1, failed=0, saturation_level=8, ts=T0 + t + 0.2))
    out.append(ev.Warning(source="telemetry", message="PCIe counters unavailable on this driver", key="pcie", ts=T0 + t + 0.3))
    out.append(ev.Warning(source="telemetry", message="PCIe counters unavailable on this driver", key="pcie", ts=T0 + t + 0.4))
    t += 1.0
    if probe:
        out.append(ev.PhaseChanged(phase="probe", detail="training probe", ts=T0 + t))
        out.append(ev.Topology(
            gpus=[{"uuid": f"GPU-{i:04d}-abcd", "index": i, "name": "RTX 4080"} for i in range(n_gpus)],
            summary=f"{n_gpus}x RTX 4080, PCIe Gen4, no P2P (NCCL through host memory)", ts=T0 + t + 0.1,
        ))
        single = ev.StatSummary(mean=5000.0, ci_low=4950.0, ci_high=5050.0, n=3)
        step1 = ev.StatSummary(mean=0.0064, ci_low=0.0063, ci_high=0.0065, n=3)
        out.append(ev.ProbeResult(
            model="mlp_6.9m", params=6_900_000, strategy="ddp", scaling="weak", world_size=1, per_device_batch=32,
            global_batch=32, device="cuda", backend="nccl", precision="bf16", samples_per_s=single, step_time_s=step1,
            speedup=1.0, efficiency=1.0,  # as engine/probe/aggregate.py fills them in at one device
            peak_mem_bytes=[512 * 2**20], gpu_util=[71.0], repeats=3, steps=30, warmup_steps=5, ts=T0 + t + 5,
        ))
        for k, world in enumerate((2, 4)):
            eff = 0.93 - 0.08 * k
            multi = ev.StatSummary(mean=5000.0 * world * eff, ci_low=5000.0 * world * eff - 60, ci_high=5000.0 * world * eff + 60, n=3)
            out.append(ev.ProbeResult(
                model="mlp_6.9m", params=6_900_000, strategy="ddp", scaling="weak", world_size=world,
                per_device_batch=32, global_batch=32 * world, device="cuda", backend="nccl", precision="bf16",
                samples_per_s=multi, step_time_s=step1, speedup=world * eff, efficiency=eff, comm_overhead=0.05 + 0.05 * k,
                peak_mem_bytes=[530 * 2**20] * world, gpu_util=[68.0 - k] * world, p_value=0.0001, significant=True,
                repeats=3, steps=30, warmup_steps=5, ts=T0 + t + 10 + 5 * k,
                baseline_samples_per_s=single, baseline_step_time_s=step1.mean, baseline_gpu_util=[71.0],
            ))
        sizes = [2**p for p in (10, 16, 20, 24, 26)]
        rows = [
            ev.AllReduceRow(size_bytes=s, time_s=2e-5 + s / 20e9, algbw_gbps=s / (2e-5 + s / 20e9) / 1e9,
                            busbw_gbps=s / (2e-5 + s / 20e9) / 1e9 * 2 * (n_gpus - 1) / n_gpus)
            for s in sizes
        ]
        out.append(ev.AllReduceResult(world_size=n_gpus, backend="nccl", device="cuda", rows=rows,
                                      link_limit_gbps=32.0, link="PCIe Gen4 x16", ts=T0 + t + 25))
        t += 26
    if end:
        out.append(ev.PhaseChanged(phase="finished", ts=T0 + t + 0.5))
        out.append(ev.SessionEnded(status="ok", exit_code=0, ts=T0 + t + 1.0))
    return out


def two_sweep_events() -> list[ev.Event]:
    """A full sweep, then a second one stopped after its first level (`s`, then `x`)."""
    out = session_events(probe=False, end=False)
    t = out[-1].ts + 1.0
    out.append(ev.LevelStarted(mode="concurrency", level=1, index=0, total=4, workers=2, ts=t))
    out.append(ev.LevelResult(
        mode="concurrency", level=1, index=0, status="stable", batch_size=1, windows=3, merged_windows=3,
        requests=1300, errors=0, throughput_rps=217.0, throughput_ips=217.0, latency=latency(0.0029),
        server=breakdown(0.0, 0.0016, 0.9), audit=ev.ClientAudit(cpu_percent=34.0, cpu_cores=16), duration_s=8.0,
        ts=t + 8.0,
    ))
    out.append(ev.SweepFinished(levels=1, stable=1, failed=0, ts=t + 8.5))
    return out
