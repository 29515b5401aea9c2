"""The training probe's entry points for the Session and the CLI.

One group of rank processes per world size runs every configuration of that world size in
turn (starting ranks, importing torch and creating NCCL communicators costs seconds per
group; paying it per configuration would spend most of a short GPU lease on start-ups).
A configuration that fails ends its group; the remaining configurations of that world size
go on in a fresh group. A hang ends the world size. Results already measured are published
as they arrive and kept.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from engine.errors import UserError
from engine.events import AllReduceResult, Error, Event, PhaseChanged, ProbeResult, Warning
from engine.probe.aggregate import Baselines, allreduce_result, train_results
from engine.probe.jobs import AllReduceJob, Job, TrainJob, plan_training
from engine.probe.launcher import LaunchOutcome, launch_group
from engine.profiles import Probe

Publish = Callable[[Event], None]
SOURCE = "probe"


def resolve_device(device: str) -> str:
    """"auto" = cuda if torch sees a GPU, else cpu."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("device 'cuda' was asked for, but torch sees no CUDA device")
    if device not in ("cuda", "cpu"):
        raise UserError(f"unknown device {device!r} (expected auto, cuda or cpu)")
    return device


def backend_for(device: str) -> str:
    return "nccl" if device == "cuda" else "gloo"


def threads_per_rank(device: str, world_size: int, largest_world: int) -> int:
    """On CPU a "device" is a fixed share of the cores: cores / the largest world size, the
    same at every world size, so that N ranks are N times the compute of one (as N GPUs
    are). Giving world size 1 every core would compare unequal devices. On GPUs the
    host threads only feed the device: cores / ranks."""
    cores = os.cpu_count() or 1
    return max(1, cores // (largest_world if device == "cpu" else world_size))


def validate_models(models: list[str]) -> None:
    """Fail before any process starts: unknown names, user modules that do not import."""
    from engine.probe.models import BUILTIN, load_factory

    for name in models:
        if name not in BUILTIN:
            load_factory(name)


def usable_world_sizes(requested: list[int], device: str, publish: Publish) -> list[int]:
    """On GPUs, sizes above the devices present are skipped (one Warning); on CPU, gloo runs
    any size, with a Warning where ranks outnumber cores (they then share them)."""
    sizes = sorted(set(requested))
    if device == "cuda":
        import torch

        count = torch.cuda.device_count()
        skipped = [w for w in sizes if w > count]
        if skipped:
            publish(Warning(source=SOURCE, key="probe-world-sizes",
                            message=f"world sizes {skipped} skipped: {count} GPU(s) present"))
        return [w for w in sizes if w <= count]
    cores = os.cpu_count() or 1
    over = [w for w in sizes if w > cores]
    if over:
        publish(Warning(source=SOURCE, key="probe-cpu-oversubscribed",
                        message=f"world sizes {over} exceed the {cores} CPU cores: ranks share cores, "
                                "figures show contention"))
    return sizes


def run_probe(
    settings: Probe,
    publish: Publish,
    stop: threading.Event,
    *,
    device: str = "auto",
    include_allreduce: bool = False,
) -> list[ProbeResult]:
    """Every configuration of ``settings`` at each usable world size, ascending; blocking.

    ``include_allreduce`` also runs the all-reduce sweep (to settings.allreduce_max_bytes) in
    each world size's group, saving a group start per world size (the CLI uses it; the
    Session calls run_allreduce_sweep itself)."""
    device = resolve_device(device)
    validate_models(settings.models)
    if include_allreduce and settings.allreduce_max_bytes < 4:
        raise UserError("probe.allreduce_max_bytes: expected at least 4 bytes (one float32)")
    sizes = usable_world_sizes(settings.world_sizes, device, publish)
    plan, warnings = plan_training(settings, sizes)
    for text in warnings:
        publish(Warning(source=SOURCE, message=text, key=f"probe-plan-{text}"))
    if plan and 1 not in plan:
        publish(Warning(source=SOURCE, key="probe-no-baseline",
                        message="world size 1 is not in the probe: no speedup or efficiency"))
    baselines = Baselines()
    results: list[ProbeResult] = []
    for ws, train_jobs in plan.items():
        if stop.is_set():
            break
        jobs: list[Job] = list(train_jobs)
        if include_allreduce and ws > 1:
            jobs.append(AllReduceJob(id=f"allreduce/ws{ws}", world_size=ws, max_bytes=settings.allreduce_max_bytes))
        threads = threads_per_rank(device, ws, max(sizes))
        collector = _run_world_size(ws, jobs, device, settings.timeout_s, stop, publish, baselines, threads)
        results += collector.results
    if stop.is_set():
        publish(Warning(source=SOURCE, key="probe-stopped",
                        message=f"probe stopped on request; {len(results)} result(s) kept"))
    return results


class ResultCollector:
    """Turns rank 0's records into events as they arrive (also used under torchrun)."""

    def __init__(self, jobs: list[Job], device: str, publish: Publish, baselines: Baselines, world_size: int) -> None:
        self.by_id = {j.id: j for j in jobs}
        self.device, self.backend = device, backend_for(device)
        self.publish, self.baselines, self.world_size = publish, baselines, world_size
        self.results: list[ProbeResult] = []
        self.sweeps: list[AllReduceResult] = []

    def on_job_start(self, job_id: str) -> None:
        phase = "all-reduce" if isinstance(self.by_id.get(job_id), AllReduceJob) else "probe"
        self.publish(PhaseChanged(phase=phase, detail=f"{self.world_size} rank(s): {job_id}"))

    def on_record(self, record: dict[str, Any]) -> None:
        job = self.by_id.get(record.get("job", ""))
        if isinstance(job, TrainJob):
            for result in train_results(job, record["ranks"], self.device, self.backend, self.baselines):
                self.baselines.add(result)
                self.results.append(result)
                self.publish(result)
        elif isinstance(job, AllReduceJob):
            sweep = allreduce_result(job, record["ranks"], self.device, self.backend)
            self.sweeps.append(sweep)
            self.publish(sweep)


def _run_world_size(
    ws: int,
    jobs: list[Job],
    device: str,
    timeout_s: float,
    stop: threading.Event,
    publish: Publish,
    baselines: Baselines,
    threads: int | None = None,
) -> ResultCollector:
    collector = ResultCollector(jobs, device, publish, baselines, ws)
    remaining = list(jobs)
    while remaining and not stop.is_set():
        outcome = launch_group(
            ws, remaining, device, timeout_s, stop, collector.on_record, collector.on_job_start, threads
        )
        if outcome.status in ("ok", "stopped"):
            break
        publish(Error(source=SOURCE, message=_describe_failure(ws, outcome), fatal=False))
        left = [j for j in remaining if j.id not in outcome.done and j.id != outcome.job]
        if outcome.status == "hung" or outcome.job is None:
            if left:
                publish(Warning(source=SOURCE, key=f"probe-skip-ws{ws}",
                                message=f"{len(left)} configuration(s) at {ws} rank(s) skipped after this failure"))
            break
        remaining = left
    return collector


def _describe_failure(ws: int, outcome: LaunchOutcome) -> str:
    where = f" in {outcome.job}" if outcome.job else ""
    verb = "hung" if outcome.status == "hung" else "failed"
    return f"probe at {ws} rank(s) {verb}{where}: {outcome.message}; the group was ended"


def run_allreduce_sweep(
    world_size: int,
    publish: Publish,
    stop: threading.Event,
    *,
    device: str = "auto",
    max_bytes: int = 1 << 30,
    timeout_s: float = 300.0,
) -> AllReduceResult | None:
    """All-reduce sizes from 1 KiB to max_bytes on world_size ranks; None if it could not run."""
    device = resolve_device(device)
    if world_size < 2:
        raise UserError(f"an all-reduce sweep needs 2 or more ranks, found {world_size}")
    if max_bytes < 4:
        raise UserError(f"all-reduce max bytes: expected at least 4 (one float32), found {max_bytes}")
    if not usable_world_sizes([world_size], device, publish):
        return None
    job = AllReduceJob(id=f"allreduce/ws{world_size}", world_size=world_size, max_bytes=max_bytes)
    threads = threads_per_rank(device, world_size, world_size)
    collector = _run_world_size(world_size, [job], device, timeout_s, stop, publish, Baselines(), threads)
    return collector.sweeps[0] if collector.sweeps else None


def run_probe_job(settings: Probe, publish: Publish, stop: threading.Event) -> None:
    """A session's probe job (in a thread): the training probe, then, when asked, the all-reduce
    sweep at each world size above one."""
    run_probe(settings, publish, stop)
    if settings.allreduce:
        for world_size in sorted({w for w in settings.world_sizes if w > 1}):
            if stop.is_set():
                break
            publish(PhaseChanged(phase="all-reduce", detail=f"{world_size} ranks"))
            run_allreduce_sweep(world_size, publish, stop, max_bytes=settings.allreduce_max_bytes)
