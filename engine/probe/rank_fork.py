"""The fork server of one rank group: it imports torch once, then forks the group's ranks.

Every rank used to import torch and the optimizer's torch._dynamo itself, about 2.5 s of CPU
each; here the group pays it once and the ranks share those pages. The server never touches
CUDA, NCCL or a thread pool before it forks: each rank picks its device and joins the group
after the fork, as a launched process does. Each rank runs in its own session, its output in its
own log; the server tells the launcher, one JSON line each on its status pipe, every rank's pid
as it forks it and every rank's exit code as it reaps it, and leaves once all have exited.

    python -m engine.probe.rank_fork --ranks N --plan PLAN.json --out-fd N --status-fd M --log-dir DIR
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

from engine.probe.worker import exit_with_parent, force_env, run_rank

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def rank_log(log_dir: Path, rank: int) -> Path:
    return log_dir / f"rank{rank}.log"


def _preload(jobs: list[dict[str, Any]]) -> None:
    """What every rank would import before its first job (torch, torch.distributed, the
    optimizer's torch._dynamo, FSDP where a job needs it), imported here once."""
    import torch.distributed  # noqa: F401  # every rank joins a group

    from engine.probe import allreduce, training  # noqa: F401  # the jobs' own modules

    training.preload({str(d.get("strategy")) for d in jobs})


def _become_rank(rank: int, jobs: list[dict[str, Any]], out_fd: int, status_fd: int, log_dir: Path) -> NoReturn:
    """In the forked child: a session of its own, its rank's environment and log, then the rank."""
    try:
        os.setsid()
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        os.close(status_fd)
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank))
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(rank_log(log_dir, rank), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
    except BaseException:
        os._exit(70)
    run_rank(jobs, out_fd)


def signal_group(pid: int, sig: int) -> None:
    """``sig`` to the session a rank leads, or to the rank alone while it has not made one yet."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def serve(world_size: int, jobs: list[dict[str, Any]], out_fd: int, status_fd: int, log_dir: Path) -> int:
    force_env()
    _preload(jobs)
    status = os.fdopen(status_fd, "w", buffering=1, encoding="utf-8")
    pids: dict[int, int] = {}  # pid -> rank
    sys.stdout.flush()
    sys.stderr.flush()
    for rank in range(world_size):
        pid = os.fork()
        if pid == 0:
            _become_rank(rank, jobs, out_fd, status_fd, log_dir)
        pids[pid] = rank
        status.write(json.dumps({"rank": rank, "pid": pid}) + "\n")
    os.close(out_fd)  # the ranks hold the records pipe: it ends when the last of them has gone
    def forward(signum: int, _frame: object) -> None:  # the launcher's stop reaches the ranks; this server reaps them
        for pid in list(pids):
            signal_group(pid, signum)

    for sig in _STOP_SIGNALS:
        signal.signal(sig, forward)
    exit_with_parent()  # were the launcher to die, this server goes, and each rank with its parent
    while pids:
        try:
            pid, wait_status = os.wait()
        except ChildProcessError:
            break
        if pid in pids:
            rank = pids.pop(pid)
            status.write(json.dumps({"rank": rank, "exit": os.waitstatus_to_exitcode(wait_status)}) + "\n")
    status.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engine.probe.rank_fork")
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--plan", required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    parser.add_argument("--status-fd", type=int, required=True)
    parser.add_argument("--log-dir", required=True)
    args = parser.parse_args(argv)
    with open(args.plan, encoding="utf-8") as fh:
        jobs = json.load(fh)
    return serve(args.ranks, jobs, args.out_fd, args.status_fd, Path(args.log_dir))


if __name__ == "__main__":
    sys.exit(main())
