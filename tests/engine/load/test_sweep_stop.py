"""A sweep stopped as a failure (the server died) fails the level it cut short, by itself: the
level's truth is the sweep's alone (engine/load/sweep.py: SweepStop, failed_by)."""

from __future__ import annotations

import asyncio

from engine import events as ev
from engine.load.sweep import SweepStop, failed_by


def _level(status: str, messages: list[str] | None = None) -> ev.LevelResult:
    return ev.LevelResult(mode="concurrency", level=4.0, index=2, status=status, batch_size=1, windows=1,
                          merged_windows=1, requests=10, errors=3, throughput_rps=1.0, throughput_ips=1.0,
                          latency=ev.LatencyStats(count=10), error_messages=messages or ["connection refused"])


def test_a_stop_asked_for_leaves_the_level_interrupted() -> None:
    for stop in (asyncio.Event(), SweepStop()):
        stop.set()
        assert failed_by(stop, _level("interrupted")).status == "interrupted"


def test_the_servers_death_fails_the_cut_level_and_names_why_first() -> None:
    stop = SweepStop()
    stop.fail("the embedded Triton server exited (SIGKILL)")
    stop.fail("a second reason")  # the first one stands
    assert stop.is_set()
    cut = failed_by(stop, _level("interrupted"))
    assert cut.status == "failed"
    assert cut.error_messages == ["the embedded Triton server exited (SIGKILL)", "connection refused"]
    failed = failed_by(stop, _level("failed"))
    assert failed.status == "failed" and failed.error_messages[0].startswith("the embedded Triton server exited")
    assert failed_by(stop, _level("stable")).status == "stable"  # decided before the death: kept
