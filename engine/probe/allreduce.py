"""All-reduce bandwidth sweep inside one rank, timed the way nccl-tests times it:
warmup operations, then back-to-back operations between two synchronisations; the time of
one operation is the mean, averaged over ranks (nccl-tests' default -a 1)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from engine.probe.bandwidth import iterations_for, sweep_sizes
from engine.probe.jobs import AllReduceJob
from engine.probe.nvml_device import link_facts
from engine.probe.training import RankContext

WARMUP_OPS = 5


def _time_ops(tensor: torch.Tensor, ops: int, ctx: RankContext) -> float:
    ctx.barrier()
    ctx.synchronize()
    start = time.perf_counter()
    for _ in range(ops):
        dist.all_reduce(tensor)
    ctx.synchronize()
    return (time.perf_counter() - start) / ops


def _agreed_max(value: float, ctx: RankContext) -> float:
    t = torch.tensor([value], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def run_allreduce_job(
    job: AllReduceJob, ctx: RankContext, progress: Callable[[str], None] = lambda what: None
) -> dict[str, Any]:
    sizes = sweep_sizes(job.max_bytes)
    buffer = torch.ones(max(sizes) // 4, dtype=torch.float32, device=ctx.device)
    times: list[float] = []
    for size in sizes:
        tensor = buffer[: size // 4]
        warm = _time_ops(tensor, WARMUP_OPS, ctx)
        # every rank must run the same number of operations: agree on the slowest warmup
        iters = iterations_for(_agreed_max(warm, ctx))
        times.append(_time_ops(tensor, iters, ctx))
        progress(f"{size} bytes")
    del buffer
    record: dict[str, Any] = {"rank": ctx.rank, "sizes": [s // 4 * 4 for s in sizes], "time_s": times}
    if ctx.rank == 0 and ctx.device.type == "cuda":
        record["gpu_name"] = torch.cuda.get_device_name(ctx.device)
        record.update(link_facts(ctx.device.index))
        if torch.cuda.device_count() > 1:
            record["peer_access"] = bool(torch.cuda.can_device_access_peer(0, 1))
    return record
