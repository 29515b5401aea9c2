"""Several client hosts, as processes on loopback, drive one session against a real Triton: the
level's throughput is the sum of the hosts' (and what the server counted), its p99 lies where the
hosts' p99s put it, each host's clock offset is measured within its bound, and a killed host is
named while the others go on, every level it missed degraded."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.host_merge import stable_tail
from engine.analysis.latency_histogram import RELATIVE_ERROR
from engine.analysis.latency_merge import merged_histogram
from engine.analysis.percentiles import percentile_index
from engine.events import LatencyStats, LevelResult, Warning, WindowResult
from engine.record.reader import Recording

pytestmark = [pytest.mark.server, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]
QUICK = ["--record", "--no-check", "--set", "load.max_trials=1", "--set", "load.contended_percent=100",
         "--set", "model.name=identity", "--set", "load.window_ms=400", "--set", "load.warmup_s=0.3",
         "--set", "load.max_windows=4"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _host(rank: int, hosts: int, port: int, url: str, out: Path, levels: str) -> subprocess.Popen:
    # its own session: killing the host kills its load workers too, as a machine that dies would
    return subprocess.Popen([sys.executable, "-m", "tui.cli", "run", *QUICK, "-o", str(out), "--url", url,
                             "--set", f"load.concurrency={levels}", "--hosts", str(hosts), "--rank", str(rank),
                             "--rendezvous", f"127.0.0.1:{port}", "--rendezvous-timeout", "60"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "GPUSCALE_RENDEZVOUS_TOKEN": "the-hosts-token"})


def _member_windows(stdout: str, rank: int) -> dict[tuple[float, int], int]:
    """(level, window) -> requests, from a member's lines."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith(f"host {rank}: level ") and " window " in line:
            words = line.split()
            found[(float(words[3]), int(words[5].rstrip(":")))] = int(words[6])
    return found


def _levels_and_windows(path: Path) -> tuple[list[LevelResult], list[WindowResult], list[Warning]]:
    with Recording.open(path) as rec:
        events = list(rec.events())
    return ([e for e in events if isinstance(e, LevelResult)], [e for e in events if isinstance(e, WindowResult)],
            [e for e in events if isinstance(e, Warning)])


def _p99_rank_off(latency: LatencyStats, step: int) -> float:
    """The sample ``step`` ranks from a figure's p99 (by the rank rule), from its histogram, in s."""
    n = latency.count
    rank = min(n - 1, max(0, percentile_index(n, 99) + step))
    return merged_histogram([latency]).value_at_rank(rank) / 1e9


def test_two_hosts_add_up(identity_server, tmp_path: Path) -> None:
    port = _free_port()
    member = _host(1, 2, port, identity_server.http_url, tmp_path / "m", "2,6")
    head = _host(0, 2, port, identity_server.http_url, tmp_path, "2,6")
    head_out, head_err = head.communicate(timeout=300)
    member_out, member_err = member.communicate(timeout=120)
    assert head.returncode == 0, (head_out[-3000:], head_err)
    assert member.returncode == 0, (member_out[-3000:], member_err)
    assert not list((tmp_path / "m").glob("*.sqlite"))  # only the head records
    (path,) = tmp_path.glob("*.sqlite")
    levels, windows, warnings = _levels_and_windows(path)
    printed = _member_windows(member_out, 1)
    assert [lv.level for lv in levels] == [2.0, 6.0]
    for lv in levels:
        assert [h.rank for h in lv.hosts] == [0, 1] and not lv.degraded
        assert [h.connections for h in lv.hosts] == ([1, 1] if lv.level == 2 else [3, 3])
        # throughput summed: the level's is the hosts' together
        assert lv.throughput_rps == pytest.approx(sum(h.throughput_rps for h in lv.hosts))
        assert lv.requests == sum(h.requests for h in lv.hosts) > 0
        # the member's share is what the member itself measured over the windows the head chose
        measured = [w for w in windows if w.level == lv.level and not w.warmup]
        end = stable_tail(measured, 3, 10.0) or len(measured)
        chosen = [w.index for w in measured[end - lv.merged_windows:end]]
        assert lv.hosts[1].requests == sum(printed[(lv.level, k)] for k in chosen)
        # and the server counted both hosts' requests (the edges of its windows hold a few in flight);
        # on a box too busy to read its statistics on time the level says so instead
        if lv.server is None:
            assert any(w.key.startswith("late-stats-") for w in warnings), warnings
        else:
            assert abs(lv.server.request_count - lv.requests) <= 0.1 * lv.requests + 2 * lv.level
        # the merged p99 lies between the hosts' own, give or take one rank of each (the rank rule
        # rounds per host and for the sum; in a sparse tail a rank is a few %) and the histogram's error
        low = min(_p99_rank_off(h.latency, -1) for h in lv.hosts)
        high = max(_p99_rank_off(h.latency, +1) for h in lv.hosts)
        assert low * (1 - RELATIVE_ERROR) <= lv.latency.p99 <= high * (1 + RELATIVE_ERROR), (low, high)
        # the member's clock, measured through the store: one machine, so the offset's bound holds it
        member_host = lv.hosts[1]
        assert member_host.clock_rtt_s is not None and member_host.clock_offset_s is not None
        assert abs(member_host.clock_offset_s) <= member_host.clock_rtt_s / 2 + 1e-9
    # the windows line up on the head's clock: every merged window spans about one window's length
    spans = np.array([w.t_end - w.t_start for w in windows if not w.warmup])
    assert (spans < 0.4 + 0.25).all(), spans


def test_a_killed_host_is_named_and_the_others_go_on(identity_server, tmp_path: Path) -> None:
    port = _free_port()
    members = [_host(r, 3, port, identity_server.http_url, tmp_path / f"m{r}", "3,6") for r in (1, 2)]
    head = _host(0, 3, port, identity_server.http_url, tmp_path, "3,6")
    doomed = members[1]
    assert doomed.stdout is not None
    for line in doomed.stdout:  # wait until it measures, then kill the whole host
        if line.startswith("host 2: level 3 window 1"):
            break
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=60)
    head_out, head_err = head.communicate(timeout=300)
    member_out, _ = members[0].communicate(timeout=120)
    assert head.returncode == 1, (head_out[-3000:], head_err)  # degraded levels: the run is not ok
    assert members[0].returncode == 0, member_out[-3000:]
    (path,) = tmp_path.glob("*.sqlite")
    levels, _, warnings = _levels_and_windows(path)
    assert [lv.level for lv in levels] == [3.0, 6.0]  # the sweep went on
    assert any(w.key == "host-gone-2" and "host 2 (" in w.message for w in warnings)
    first, second = levels
    assert "host 2 (" in first.degraded and first.hosts[2].missing
    assert "host 2 (" in second.degraded and second.hosts[2].missing
    assert second.hosts[2].requests == 0 and second.hosts[1].requests > 0 and second.hosts[0].requests > 0
    assert second.throughput_rps == pytest.approx(second.hosts[0].throughput_rps + second.hosts[1].throughput_rps)


def test_a_host_stopped_on_its_own_is_left_out_not_the_session(identity_server, tmp_path: Path) -> None:
    port = _free_port()
    member = _host(1, 2, port, identity_server.http_url, tmp_path / "m", "2,4")
    head = _host(0, 2, port, identity_server.http_url, tmp_path, "2,4")
    assert member.stdout is not None
    for line in member.stdout:  # measuring: then Ctrl-C on that host alone
        if line.startswith("host 1: level 2 window 1"):
            break
    os.killpg(member.pid, signal.SIGINT)
    member.communicate(timeout=120)
    assert member.returncode != 0  # its sweep did not run to its end
    head_out, head_err = head.communicate(timeout=300)
    assert head.returncode == 1, (head_out[-3000:], head_err)  # degraded, not interrupted (130) nor ok
    (path,) = tmp_path.glob("*.sqlite")
    levels, _, warnings = _levels_and_windows(path)
    assert [lv.level for lv in levels] == [2.0, 4.0]
    assert all(lv.status != "interrupted" and "host 1 (" in lv.degraded for lv in levels)
    assert any(w.key == "host-gone-1" for w in warnings)
