"""One training measurement inside one rank: build, wrap (DDP / FSDP2), warm up, time.

Timing touches the device only at run boundaries (barrier + synchronize before, synchronize
after): per-step synchronisation would remove the CPU/GPU overlap real training has and
inflate small-model step times. Each rank returns its own raw figures; rank 0 gathers them.
Imports happen during a rank's start-up, before the first job's no-progress clock starts:
at module level, and the lazy ones through preload().
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from engine.probe.jobs import TrainJob
from engine.probe.models import build_model, count_params
from engine.probe.nvml_device import UtilizationSampler

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class RankContext:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    mesh: Any = None  # FSDP's DeviceMesh, made by the first FSDP job

    @property
    def cuda_index(self) -> int | None:
        return self.device.index if self.device.type == "cuda" else None

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        if self.world_size > 1:
            if self.device.type == "cuda":
                dist.barrier(device_ids=[self.device.index])
            else:
                dist.barrier()


def wrap(module: nn.Module, units: list[nn.Module], strategy: str, precision: str, ctx: RankContext) -> nn.Module:
    if strategy == "single":
        return module
    if strategy == "ddp":
        return DDP(module, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)
    if strategy == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        if ctx.mesh is None:  # one mesh per group: FSDP jobs after the first reuse its communicators
            ctx.mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
        kwargs: dict[str, Any] = {"mesh": ctx.mesh}
        if precision in DTYPES:  # FSDP's own policy: all-gathers in low precision, reductions in fp32
            kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=DTYPES[precision], reduce_dtype=torch.float32)
        for unit in units:
            fully_shard(unit, **kwargs)
        fully_shard(module, **kwargs)
        return module
    raise ValueError(f"unknown strategy {strategy!r}")


def preload(strategies: set[str]) -> None:
    """Lazy imports the first job would otherwise pay on its clock: the optimizer's first
    construction imports torch._dynamo (1.7 s), FSDP imports DTensor and sympy (1.4 s)."""
    torch.optim.AdamW([nn.Parameter(torch.zeros(1))])
    if "fsdp" in strategies:
        importlib.import_module("torch.distributed.fsdp")


class Trainer:
    """The step the probe times, and the same step without gradient synchronisation."""

    def __init__(self, job: TrainJob, ctx: RankContext) -> None:
        torch.manual_seed(1234 + ctx.rank)
        pm = build_model(job.model)
        self.params = count_params(pm.module)
        self.ctx, self.job = ctx, job
        module = pm.module.to(ctx.device)
        self.model = wrap(module, pm.shard_units, job.strategy, job.precision, ctx)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.inputs, self.targets = pm.make_batch(job.per_device_batch, ctx.device)
        self.loss_fn = pm.loss_fn
        # FSDP casts its own parameters; autocast is for the plain and DDP models
        use_autocast = job.precision in DTYPES and job.strategy != "fsdp"
        self.autocast: Callable[[], Any] = (
            (lambda: torch.autocast(ctx.device.type, dtype=DTYPES[job.precision]))
            if use_autocast
            else contextlib.nullcontext
        )
        self.scaler = torch.amp.GradScaler(ctx.device.type) if job.precision == "fp16" else None

    def step(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)
        with self.autocast():
            loss = self.loss_fn(self.model(self.inputs), self.targets)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()

    @contextlib.contextmanager
    def no_sync(self):
        """DDP: no_sync() skips the gradient all-reduce. FSDP2: no gradient reduce-scatter
        (parameter all-gathers still run, so FSDP's figure is the reduction share only)."""
        if self.job.strategy == "ddp":
            with self.model.no_sync():
                yield
        elif self.job.strategy == "fsdp":
            self.model.set_requires_gradient_sync(False)
            try:
                yield
            finally:
                self.model.set_requires_gradient_sync(True)
        else:
            yield

    def timed_run(self, steps: int, sync_grads: bool = True) -> float:
        ctx = self.ctx
        ctx.barrier()
        ctx.synchronize()
        start = time.perf_counter()
        if sync_grads:
            for _ in range(steps):
                self.step()
        else:
            # keep the sharded gradients (zeros) so that the optimizer does the same work
            with self.no_sync():
                for _ in range(steps):
                    self.step(set_to_none=self.job.strategy != "fsdp")
        ctx.synchronize()
        return time.perf_counter() - start


def _quiet(what: str) -> None:
    pass


def run_train_job(job: TrainJob, ctx: RankContext, progress: Callable[[str], None] = _quiet) -> dict[str, Any]:
    """This rank's raw figures: seconds per run of ``steps`` steps, the no-sync run, memory, util.
    ``progress`` is called between timed runs (a heartbeat for the launcher's timeout)."""
    if ctx.device.type == "cuda":
        gc.collect()  # the previous job's wrapped model holds cycles (hooks): free it before the peak
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(ctx.device)
    trainer = Trainer(job, ctx)
    for _ in range(job.warmup_steps):
        trainer.step()
    progress("warmup")
    run_s: list[float] = []
    with UtilizationSampler(ctx.cuda_index) as util:
        for n in range(job.repeats):
            run_s.append(trainer.timed_run(job.steps))
            progress(f"run {n + 1}")
    # read before the no-sync run: FSDP keeps unsharded gradients there, which real training does not
    peak = int(torch.cuda.max_memory_allocated(ctx.device)) if ctx.device.type == "cuda" else None
    nosync_s = trainer.timed_run(job.steps, sync_grads=False) if job.strategy != "single" else None
    return {
        "rank": ctx.rank,
        "params": trainer.params,
        "run_s": run_s,
        "nosync_s": nosync_s,
        "peak_mem_bytes": peak,
        "gpu_util": util.mean(),
    }
