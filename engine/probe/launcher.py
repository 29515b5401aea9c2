"""Start one group of rank processes on this host, watch them, and end them.

The parent holds the rendezvous (a TCPStore on a free loopback port, so no port race) and a
pipe that rank 0 writes JSON lines to. The ranks are forked from one fork server per group
(engine.probe.rank_fork: torch imported once, not once a rank), which says each rank's pid and exit
code on a status pipe. Every rank runs in its own session so that ending it ends anything it
started. A group ends in one of four ways: every job done ("ok"), a rank
exited with an error ("failed": the others are ended at once, they would hang in their next
collective), no progress within the timeout ("hung": rank 0 reports between timed runs, so
the timeout bounds a run, not a whole configuration), or the caller's stop event ("stopped").
Records that arrived before the end are already delivered: measured results are kept.
"""

from __future__ import annotations

import datetime
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.probe.jobs import Job, job_to_dict
from engine.probe.rank_fork import rank_log, signal_group
from engine.probe.worker import DEVICE_ENV, FORCED_ENV, STORE_ENV, THREADS_ENV, TIMEOUT_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_MIN_S = 120.0  # python + torch import + CUDA/NCCL init of every rank, on a busy host
POLL_S = 0.2
TERM_GRACE_S = 3.0


@dataclass
class LaunchOutcome:
    status: str  # "ok", "failed", "hung", "stopped"
    job: str | None = None  # the job under way when the group ended early
    message: str = ""
    done: list[str] = field(default_factory=list)


def _group_env(world_size: int, store_port: int, device: str, timeout_s: float, threads: int) -> dict[str, str]:
    """The fork server's environment, the ranks' but for RANK and LOCAL_RANK (each child sets its own)."""
    env = dict(os.environ)
    env.update(FORCED_ENV)
    pythonpath = [str(REPO_ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env.update(
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        OMP_NUM_THREADS=str(threads),
        PYTHONPATH=os.pathsep.join(dict.fromkeys(pythonpath)),
        # the ranks' own collective timeout is longer than our watch: a hang is reported as a
        # hang (here), not as a peer's "timed out waiting for recv"
        **{STORE_ENV: f"127.0.0.1:{store_port}", DEVICE_ENV: device, TIMEOUT_ENV: str(2 * timeout_s + 30),
           THREADS_ENV: str(threads)},
    )
    env.pop("TORCHELASTIC_RUN_ID", None)
    return env


def _tail(path: Path, lines: int = 1) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    useful = [t for t in text if t.strip() and not t.startswith(("W1", "I1", "[W", "[I"))] or text
    return " | ".join(t.strip() for t in useful[-lines:])[:300]


class ForkedRank:
    """A rank of the fork server: its pid and its exit code arrive on the server's status pipe.
    Answers ``poll``, ``wait`` and ``pid`` as a Popen does."""

    def __init__(self, log: Path) -> None:
        self.pid: int | None = None
        self.returncode: int | None = None
        self.log = log  # the rank's own, or the server's where the rank never started
        self._ended = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired("rank", timeout or 0.0)
        return self.returncode

    def end(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self._ended.set()


Process = subprocess.Popen | ForkedRank


def end_processes(procs: list[Process]) -> None:
    """SIGTERM to each rank's process group, SIGKILL to what is left after a grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [p for p in procs if p.poll() is None]
        for p in alive:
            if p.pid is not None:  # a rank the server has not forked yet
                signal_group(p.pid, sig)
        deadline = time.monotonic() + TERM_GRACE_S
        for p in alive:
            try:
                p.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    for p in procs:  # reap; after SIGKILL this returns at once
        try:
            p.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            pass


def _follow_server(server: subprocess.Popen, fd: int, ranks: list[ForkedRank], server_log: Path) -> None:
    """The fork server's status lines onto the ranks; when it has gone, every rank it did not
    report ends with the server's exit code (and the server's log, where the rank never started)."""
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as pipe:
        for line in pipe:
            try:
                said = json.loads(line)
                rank = ranks[int(said["rank"])]
            except (ValueError, KeyError, IndexError, TypeError):
                continue
            if "pid" in said:
                rank.pid = int(said["pid"])
            elif "exit" in said:
                rank.end(int(said["exit"]))
    code = server.wait()
    for rank in ranks:
        if rank.returncode is None:
            if rank.pid is None:
                rank.log = server_log
            rank.end(code if code != 0 else -signal.SIGKILL)


def _read_lines(fd: int, out: queue.Queue) -> None:
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as pipe:
        for line in pipe:
            try:
                out.put(json.loads(line))
            except json.JSONDecodeError:
                continue  # a rank killed mid-write
    out.put(None)


def launch_group(
    world_size: int,
    jobs: list[Job],
    device: str,
    timeout_s: float,
    stop: threading.Event,
    on_record: Callable[[dict[str, Any]], None],
    on_job_start: Callable[[str], None] | None = None,
    threads_per_rank: int | None = None,
) -> LaunchOutcome:
    """Run ``jobs`` on ``world_size`` new rank processes; deliver each result record to
    ``on_record`` as it arrives. Blocks until the group has ended; no rank outlives it.
    ``threads_per_rank``: torch's intra-op threads in each rank (default: cores / ranks)."""
    threads = threads_per_rank or max(1, (os.cpu_count() or 1) // world_size)
    import torch.distributed as dist

    store = dist.TCPStore(
        "127.0.0.1", 0, None, is_master=True, timeout=datetime.timedelta(seconds=timeout_s), wait_for_workers=False
    )
    outcome = LaunchOutcome(status="ok")
    with tempfile.TemporaryDirectory(prefix="gpuscale-probe-") as tmp:
        plan_path = Path(tmp) / "plan.json"
        plan_path.write_text(json.dumps([job_to_dict(j) for j in jobs]), encoding="utf-8")
        read_fd, write_fd = os.pipe()
        status_r, status_w = os.pipe()
        server_log = Path(tmp) / "fork-server.log"
        ranks = [ForkedRank(rank_log(Path(tmp), r)) for r in range(world_size)]
        try:
            with open(server_log, "wb") as log:
                server = subprocess.Popen(
                    [sys.executable, "-m", "engine.probe.rank_fork", "--ranks", str(world_size),
                     "--plan", str(plan_path), "--out-fd", str(write_fd), "--status-fd", str(status_w),
                     "--log-dir", tmp],
                    env=_group_env(world_size, store.port, device, timeout_s, threads),
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    pass_fds=(write_fd, status_w), start_new_session=True,
                )
        except BaseException:
            for fd in (write_fd, read_fd, status_r, status_w):
                os.close(fd)
            raise
        os.close(write_fd)  # EOF on the pipe once every rank has gone
        os.close(status_w)
        status = threading.Thread(target=_follow_server, args=(server, status_r, ranks, server_log),
                                  name="probe-fork-server", daemon=True)
        status.start()
        records: queue.Queue = queue.Queue()
        reader = threading.Thread(target=_read_lines, args=(read_fd, records), name="probe-pipe", daemon=True)
        reader.start()
        try:
            outcome = _follow_ranks(ranks, records, jobs, timeout_s, stop, on_record, on_job_start)
        finally:
            end_processes([*ranks, server])
            status.join(timeout=5.0)
            reader.join(timeout=5.0)
    del store
    return outcome


def _follow_ranks(
    procs: list[ForkedRank],
    records: queue.Queue,
    jobs: list[Job],
    timeout_s: float,
    stop: threading.Event,
    on_record: Callable[[dict[str, Any]], None],
    on_job_start: Callable[[str], None] | None,
) -> LaunchOutcome:
    """Follow the ranks' records (jobs started and done, errors) until every rank has exited, a
    job ran past its timeout, or a stop was asked; then say how the group ended."""
    state: dict[str, Any] = {"done": [], "current": None, "errors": [], "pipe_open": True}
    deadline = time.monotonic() + max(timeout_s, STARTUP_MIN_S)

    def take(record: dict[str, Any] | None) -> None:
        nonlocal deadline
        if record is None:
            state["pipe_open"] = False
        elif record.get("type") == "job_start":
            state["current"] = record.get("job")
            deadline = time.monotonic() + timeout_s
            if on_job_start is not None:
                on_job_start(str(state["current"]))
        elif record.get("type") == "progress":
            deadline = time.monotonic() + timeout_s
        elif record.get("type") == "result":
            state["done"].append(record.get("job"))
            on_record(record)
        elif record.get("type") == "error":
            state["errors"].append(record)

    def drain(wait_s: float) -> None:
        end = time.monotonic() + wait_s
        while state["pipe_open"] and not (wait_s and stop.is_set()):
            try:
                take(records.get(timeout=max(0.0, end - time.monotonic())))
            except queue.Empty:
                return

    while True:
        if stop.is_set():
            drain(0.0)
            return LaunchOutcome("stopped", state["current"], "stopped on request", state["done"])
        if state["pipe_open"]:
            drain(POLL_S)
        else:
            time.sleep(POLL_S)
        codes = [p.poll() for p in procs]
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if failed or state["errors"]:
            drain(0.5)  # what was written before the failure is kept; the rank's own error line too
            message = _failure_message(failed, state["errors"], procs)
            return LaunchOutcome("failed", state["current"], message, state["done"])
        if all(c == 0 for c in codes) and not state["pipe_open"]:
            if len(state["done"]) < len(jobs):
                return LaunchOutcome("failed", state["current"], "ranks exited before finishing", state["done"])
            return LaunchOutcome("ok", None, "", state["done"])
        if time.monotonic() > deadline:
            drain(0.0)
            what = "" if state["current"] else " during start-up"
            message = f"no progress for {timeout_s:.0f} s{what}"
            return LaunchOutcome("hung", state["current"], message, state["done"])


# errors a healthy rank raises because a peer went away: not the cause
_PEER_SYMPTOMS = ("connection closed", "connection reset", "broken pipe", "aborted", "peer", "timed out")


def _failure_message(failed: list[tuple[int, int]], errors: list[dict[str, Any]], ranks: list[ForkedRank]) -> str:
    if errors:
        causes = [e for e in errors if not any(k in str(e.get("message", "")).lower() for k in _PEER_SYMPTOMS)]
        first = (causes or errors)[0]
        return f"rank {first.get('rank')} failed: {first.get('message')}"
    rank, code = failed[0]
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    who = f"rank {rank}" if ranks[rank].pid is not None else f"the ranks' fork server (before rank {rank} started)"
    tail = _tail(ranks[rank].log)
    return f"{who} {how}" + (f": {tail}" if tail else "")
