"""Raw per-rank figures -> the contract's events. Pure: no torch, no processes.

A run's time is the slowest rank's (the step is done when every rank is done); samples/s of a
run = global batch x steps / that time. Runs are summarised with seed 002's statistics, and
world sizes > 1 are compared with world size 1 at the same model, precision and batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.analysis.scaling import scaling_efficiency, speedup
from engine.analysis.stats import is_significant, summarize, welch_from_summaries
from engine.events import AllReduceResult, ProbeResult
from engine.probe.bandwidth import allreduce_row, link_limit
from engine.probe.jobs import AllReduceJob, TrainJob

BaselineKey = tuple[str, str, int]  # model, precision, batch (per device = global at world size 1)


@dataclass
class Baselines:
    """World size 1 results, samples/s, that later world sizes are compared with."""

    by_key: dict[BaselineKey, ProbeResult] = field(default_factory=dict)

    def add(self, result: ProbeResult) -> None:
        if result.world_size == 1:
            self.by_key[(result.model, result.precision, result.global_batch)] = result

    def get(self, model: str, precision: str, batch: int) -> ProbeResult | None:
        return self.by_key.get((model, precision, batch))


def run_times(ranks: list[dict[str, Any]]) -> list[float]:
    """Per run, the slowest rank's seconds."""
    return [max(values) for values in zip(*(r["run_s"] for r in ranks), strict=False)]


def comm_overhead(step_time_sync: float, ranks: list[dict[str, Any]], steps: int) -> float | None:
    """Fraction of the synchronised step spent on gradient communication:
    (t_sync - t_no_sync) / t_sync. Noise can make it slightly negative; it is kept as is."""
    nosync = [r.get("nosync_s") for r in ranks]
    known = [float(v) for v in nosync if v is not None]
    if step_time_sync <= 0 or len(known) != len(nosync) or not nosync:
        return None
    t_nosync = max(known) / steps
    return (step_time_sync - t_nosync) / step_time_sync


def train_results(
    job: TrainJob, ranks: list[dict[str, Any]], device: str, backend: str, baselines: Baselines
) -> list[ProbeResult]:
    """One ProbeResult per view of the job (weak and/or strong scaling), same measurement."""
    times = run_times(ranks)
    samples = [job.global_batch * job.steps / t for t in times]
    sps = summarize(samples)
    step = summarize([t / job.steps for t in times])
    overhead = comm_overhead(step.mean, ranks, job.steps) if job.world_size > 1 else None
    peak = [int(r["peak_mem_bytes"]) for r in ranks if r.get("peak_mem_bytes") is not None]
    util: list[float | None] = [float(r["gpu_util"]) for r in ranks if r.get("gpu_util") is not None]
    out: list[ProbeResult] = []
    for view in job.views or []:
        base = baselines.get(job.model, job.precision, view.batch) if job.world_size > 1 else None
        up = eff = p = None
        if job.world_size == 1:
            up, eff = 1.0, 1.0
        elif base is not None:
            up = speedup(sps.mean, base.samples_per_s.mean)
            eff = scaling_efficiency(sps.mean, base.samples_per_s.mean, job.world_size)
            test = welch_from_summaries(sps, base.samples_per_s)
            p = test.p_value if test else None
        out.append(
            ProbeResult(
                model=job.model,
                params=int(ranks[0]["params"]),
                strategy=job.strategy,
                scaling=view.scaling,
                world_size=job.world_size,
                per_device_batch=job.per_device_batch,
                global_batch=job.global_batch,
                device=device,
                backend=backend,
                precision=job.precision,
                samples_per_s=sps,
                step_time_s=step,
                speedup=up,
                efficiency=eff,
                comm_overhead=overhead,
                peak_mem_bytes=peak,
                gpu_util=util,
                p_value=p,
                significant=is_significant(p),
                warmup_steps=job.warmup_steps,
                steps=job.steps,
                repeats=job.repeats,
                baseline_samples_per_s=base.samples_per_s if base else None,
                baseline_step_time_s=base.step_time_s.mean if base else None,
                baseline_gpu_util=list(base.gpu_util) if base else [],
            )
        )
    return out


def allreduce_result(job: AllReduceJob, ranks: list[dict[str, Any]], device: str, backend: str) -> AllReduceResult:
    """Rows from the ranks' mean times (nccl-tests' default: time averaged over ranks)."""
    first = ranks[0]
    mean_times = [sum(values) / len(values) for values in zip(*(r["time_s"] for r in ranks), strict=False)]
    rows = [allreduce_row(size, t, job.world_size) for size, t in zip(first["sizes"], mean_times, strict=False)]
    link = link_limit(
        first.get("gpu_name") if device == "cuda" else None,
        nvlink_links=first.get("nvlink_links"),
        pcie_gen=first.get("pcie_gen"),
        pcie_width=first.get("pcie_width"),
        peer_access=first.get("peer_access"),
    )
    return AllReduceResult(
        world_size=job.world_size, backend=backend, device=device, rows=rows,
        link_limit_gbps=link.limit_gbps, link=link.label,
    )
