"""A rank process: join the process group, run the jobs in order, send results out.

Forked by engine.probe.rank_fork for engine.probe.launcher (rendezvous on a TCPStore that the
launcher holds on loopback; ``run_rank``), or started by torchrun (env:// rendezvous, multi-node:
engine.probe.cli). Rank 0 gathers every rank's figures per job and hands one record to ``emit``;
any rank that fails emits an "error" record first and exits non-zero, so the parent can end the
group at once.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

# NVLink multicast (NVLS) stays off on every rank, whatever the caller's environment says;
# set before torch / NCCL read them.
FORCED_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
STORE_ENV = "GPUSCALE_PROBE_STORE"  # "host:port" of the parent's TCPStore
DEVICE_ENV = "GPUSCALE_PROBE_DEVICE"  # "cuda" or "cpu"
TIMEOUT_ENV = "GPUSCALE_PROBE_TIMEOUT_S"
THREADS_ENV = "GPUSCALE_PROBE_THREADS"  # torch intra-op threads per rank

Emit = Callable[[dict[str, Any]], None]


def force_env() -> None:
    os.environ.update(FORCED_ENV)


def _set_threads(local_world: int) -> None:
    import torch

    # ranks sharing a host share its cores; oversubscription would measure the scheduler
    fallback = max(1, (os.cpu_count() or 1) // max(1, local_world))
    torch.set_num_threads(int(os.environ.get(THREADS_ENV, fallback)))


def init_rank(device_kind: str, timeout_s: float):
    """Join the group (also for world size 1: one code path) and pick this rank's device."""
    import torch
    import torch.distributed as dist

    from engine.probe.training import RankContext

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    _set_threads(local_world)
    if device_kind == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    backend = "nccl" if device_kind == "cuda" else "gloo"
    timeout = datetime.timedelta(seconds=timeout_s)
    store_addr = os.environ.get(STORE_ENV)
    if store_addr:
        host, port = store_addr.rsplit(":", 1)
        store = dist.TCPStore(host, int(port), world, is_master=False, timeout=timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)
    else:
        dist.init_process_group(backend, init_method="env://", timeout=timeout)
    return RankContext(rank=rank, world_size=world, local_rank=local_rank, device=device)


def run_jobs(jobs: list[dict[str, Any]], ctx, emit: Emit, state: dict[str, Any] | None = None) -> None:
    """Rank 0 emits {"type": "job_start"} before each job, {"type": "progress"} between its
    timed runs and {"type": "result"} after it.
    ``state["job"]`` names the job under way on every rank (for error records)."""
    import torch.distributed as dist

    from engine.probe.allreduce import run_allreduce_job
    from engine.probe.jobs import TrainJob, job_from_dict
    from engine.probe.training import preload, run_train_job

    preload({str(d.get("strategy")) for d in jobs})
    ctx.barrier()  # every rank is up (and NCCL's communicator made) before the first job's clock
    for data in jobs:
        job = job_from_dict(data)
        if state is not None:
            state["job"] = job.id
        if ctx.rank == 0:
            emit({"type": "job_start", "job": job.id})
        progress = _progress_emitter(emit, job.id) if ctx.rank == 0 else _no_progress
        if isinstance(job, TrainJob):
            record = run_train_job(job, ctx, progress)
        else:
            record = run_allreduce_job(job, ctx, progress)
        gathered: list[Any] | None = [None] * ctx.world_size if ctx.rank == 0 else None
        dist.gather_object(record, gathered, dst=0)
        if ctx.rank == 0:
            emit({"type": "result", "job": job.id, "ranks": gathered})


def _progress_emitter(emit: Emit, job_id: str) -> Callable[[str], None]:
    """Heartbeats between timed runs (never inside one): the launcher's timeout means
    "no progress for that long", so a slow configuration is not mistaken for a hung one."""

    def progress(what: str) -> None:
        emit({"type": "progress", "job": job_id, "what": what})

    return progress


def _no_progress(what: str) -> None:
    pass


def _pipe_emitter(fd: int) -> Emit:
    def emit(record: dict[str, Any]) -> None:
        # one os.write per line: lines below PIPE_BUF from different ranks never interleave
        os.write(fd, (json.dumps(record) + "\n").encode())

    return emit


def error_record(rank: int, job: str | None, exc: BaseException) -> dict[str, Any]:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" (at {os.path.basename(last[0].filename)}:{last[0].lineno})" if last else ""
    message = f"{type(exc).__name__}: {exc}".strip().splitlines()
    text = (message[0] if message else type(exc).__name__)[:400]
    return {"type": "error", "rank": rank, "job": job, "message": text + where}


def exit_with_parent() -> None:
    """Leave when this process's parent dies (a launcher killed -9, a machine session closed): a
    rank follows its fork server, the fork server its launcher."""
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(3)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def run_rank(jobs: list[dict[str, Any]], out_fd: int) -> NoReturn:
    """This process as one rank: join, run the jobs, leave with os._exit (also a rank that
    engine.probe.rank_fork forked)."""
    force_env()
    exit_with_parent()
    emit = _pipe_emitter(out_fd)
    rank = int(os.environ.get("RANK", "0"))
    current: dict[str, Any] = {"job": None}
    try:
        ctx = init_rank(os.environ.get(DEVICE_ENV, "cpu"), float(os.environ.get(TIMEOUT_ENV, "300")))
        run_jobs(jobs, ctx, emit, current)
        import torch.distributed as dist

        dist.destroy_process_group()
    except BaseException as exc:  # report, then leave at once: peers may hang in a collective
        try:
            emit(error_record(rank, current["job"], exc))
        finally:
            sys.stderr.flush()
            os._exit(1)
    # everything is written (os.write is unbuffered); skip seconds of interpreter teardown
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
