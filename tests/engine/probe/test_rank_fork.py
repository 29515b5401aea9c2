"""The ranks' fork server (engine/probe/rank_fork.py): one process imports torch and forks the
group's ranks, each in its own session; the launcher learns their pids and exit codes from the
server's status lines, and a server that dies before a rank starts is what the failure names."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import psutil
import pytest

from engine.events import PhaseChanged
from engine.probe.launcher import ForkedRank, _failure_message, _follow_server
from engine.probe.orchestrate import run_probe
from engine.profiles import Probe
from tests.engine.probe.conftest import FIXTURES


class _Server:
    """The Popen side of a fork server that has already exited with ``code``."""

    def __init__(self, code: int) -> None:
        self.code = code

    def wait(self) -> int:
        return self.code


def _said(lines: list[dict], server_code: int, ranks: int, tmp_path: Path) -> list[ForkedRank]:
    read_fd, write_fd = os.pipe()
    with os.fdopen(write_fd, "w") as pipe:
        pipe.write("".join(json.dumps(line) + "\n" for line in lines) + "not json\n")
    followed = [ForkedRank(tmp_path / f"rank{r}.log") for r in range(ranks)]
    _follow_server(_Server(server_code), read_fd, followed, tmp_path / "fork-server.log")  # type: ignore[arg-type]
    return followed


def test_each_rank_takes_its_pid_and_exit_code_from_the_status_lines(tmp_path: Path) -> None:
    ranks = _said([{"rank": 0, "pid": 11}, {"rank": 1, "pid": 12}, {"rank": 1, "exit": -9}, {"rank": 0, "exit": 0}],
                  0, 2, tmp_path)
    assert [(r.pid, r.poll(), r.wait(0)) for r in ranks] == [(11, 0, 0), (12, -9, -9)]
    assert [r.log.name for r in ranks] == ["rank0.log", "rank1.log"]


def test_a_server_that_dies_before_a_rank_starts_is_what_the_failure_names(tmp_path: Path) -> None:
    (tmp_path / "fork-server.log").write_text("ModuleNotFoundError: No module named 'torch'\n")
    ranks = _said([{"rank": 0, "pid": 11}], 1, 2, tmp_path)
    assert [(r.pid, r.poll()) for r in ranks] == [(11, 1), (None, 1)]  # rank 0's own exit was never said
    assert ranks[1].log.name == "fork-server.log"
    message = _failure_message([(1, 1)], [], ranks)
    assert message == ("the ranks' fork server (before rank 1 started) exited with code 1: "
                       "ModuleNotFoundError: No module named 'torch'")
    assert _failure_message([(0, -9)], [], ranks).startswith("rank 0 was killed by signal 9")


def test_a_rank_not_yet_ended_times_out_as_a_popen_does(tmp_path: Path) -> None:
    rank = ForkedRank(tmp_path / "rank0.log")
    with pytest.raises(Exception, match="timed out"):
        rank.wait(0.01)
    assert rank.poll() is None


@pytest.mark.slow
@pytest.mark.xdist_group("cpu_heavy")  # torch ranks: tests/conftest.py
def test_the_ranks_are_forked_from_one_server_each_in_its_own_session(no_ranks_left) -> None:
    """Two ranks that hang in their first step (so they are there when looked at, however late the
    launcher reads their job's start on a busy box), then the stop ends them."""
    seen: list[list[tuple[int, int]]] = []
    stop = threading.Event()

    def look(event: object) -> None:
        if isinstance(event, PhaseChanged) and event.detail.startswith("2 rank(s)"):
            (server,) = [p for p in psutil.Process().children() if "engine.probe.rank_fork" in " ".join(p.cmdline())]
            seen.append([(p.pid, os.getsid(p.pid)) for p in server.children()])
            stop.set()

    settings = Probe(models=[f"{FIXTURES}:hang_everywhere"], strategies=["ddp"], batch_sizes=[4], world_sizes=[2],
                     scaling=["weak"], steps=3, warmup_steps=1, repeats=3, timeout_s=120.0)
    run_probe(settings, look, stop, device="cpu")
    (ranks,) = seen
    assert len(ranks) == 2 and all(pid == sid for pid, sid in ranks)  # each rank leads its own session
