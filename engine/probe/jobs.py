"""What to measure: the profile's probe settings turned into jobs, one list per world size.

Pure: no torch. A job is one measurement; the same measurement can answer several questions
(views): world size 1 serves every strategy, and at world size N a weak-scaling run with
per-device batch b is the same run as strong scaling with global batch b x N.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from engine.profiles import Probe


@dataclass(frozen=True)
class View:
    scaling: str  # "weak": batch is per device; "strong": batch is the global batch
    batch: int  # the profile's batch size this measurement answers for


@dataclass
class TrainJob:
    id: str
    model: str
    strategy: str  # "single" (world size 1, no wrapper), "ddp", "fsdp"
    world_size: int
    per_device_batch: int
    precision: str
    steps: int
    warmup_steps: int
    repeats: int
    views: list[View] = field(default_factory=list)
    kind: str = "train"

    @property
    def global_batch(self) -> int:
        return self.per_device_batch * self.world_size


@dataclass
class AllReduceJob:
    id: str
    world_size: int
    max_bytes: int
    kind: str = "allreduce"


Job = TrainJob | AllReduceJob


def job_to_dict(job: Job) -> dict[str, Any]:
    return asdict(job)


def job_from_dict(data: dict[str, Any]) -> Job:
    if data.get("kind") == "allreduce":
        return AllReduceJob(**data)
    views = [View(**v) for v in data.get("views", [])]
    return TrainJob(**{**data, "views": views})


def effective_warmup(warmup_steps: int) -> int:
    """At least one warmup step, always: step 1 is where DDP rebuilds its buckets and where
    lazy initialisation (cuBLAS handles, autocast caches, NCCL communicators) happens."""
    return max(1, warmup_steps)


def plan_training(settings: Probe, world_sizes: list[int]) -> tuple[dict[int, list[TrainJob]], list[str]]:
    """Jobs per world size (ascending, so world size 1, the baseline, comes first), and the
    warnings for combinations that cannot be run (a global batch that does not split)."""
    warnings: list[str] = []
    plan: dict[int, list[TrainJob]] = {}
    for ws in sorted(set(world_sizes)):
        jobs: dict[tuple[str, str, int], TrainJob] = {}
        strategies = ["single"] if ws == 1 else list(dict.fromkeys(settings.strategies))
        for model in settings.models:
            for batch in settings.batch_sizes:
                for scaling in settings.scaling:
                    if scaling == "weak":
                        per_device = batch
                    elif batch % ws:
                        warnings.append(
                            f"strong scaling: global batch {batch} does not split over {ws} devices; skipped"
                        )
                        continue
                    else:
                        per_device = batch // ws
                    for strategy in strategies:
                        key = (model, strategy, per_device)
                        if key not in jobs:
                            jobs[key] = TrainJob(
                                id=f"{model}/{strategy}/ws{ws}/b{per_device}",
                                model=model,
                                strategy=strategy,
                                world_size=ws,
                                per_device_batch=per_device,
                                precision=settings.precision,
                                steps=settings.steps,
                                warmup_steps=effective_warmup(settings.warmup_steps),
                                repeats=settings.repeats,
                            )
                        view = View(scaling, batch)
                        if view not in jobs[key].views:
                            jobs[key].views.append(view)
        if jobs:
            plan[ws] = list(jobs.values())
    return plan, list(dict.fromkeys(warnings))
