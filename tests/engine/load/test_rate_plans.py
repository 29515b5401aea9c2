"""The plans a rate-mode level hands its workers (pure logic, no worker is started): the rate is
shared out, the schedules interleave, and each worker opens 20 ms of its sends before T0, at
most 128 (Worker.open_more says why few should be opened during the level)."""

from __future__ import annotations

import asyncio

import pytest

from engine.load.pool import WorkerPool
from engine.load.sweep import SweepContext, _Level
from engine.profiles import Load
from engine.triton.api import TritonApi
from engine.triton.target import Target, TargetInfo


def _plans(rate: float, workers: int):
    load = Load(mode="rate", rates=[rate], arrival="constant", workers=workers)
    api = TritonApi(Target("http://127.0.0.1:8000", "m"), TargetInfo({}, [], [], 0))
    level = _Level(SweepContext.of(WorkerPool(workers), api, load, lambda event: None, asyncio.Event()), rate, 0, 1)
    return level.plans()


@pytest.mark.parametrize(("rate", "workers", "preopen"), [
    (8000.0, 8, 24),    # 1,000/s each: 4 + 20 ms of sends
    (400.0, 4, 6),      # 100/s each: 4 + 2
    (40000.0, 2, 128),  # 20,000/s each: 404 would be wanted; 128 at most
])
def test_each_worker_opens_20_ms_of_its_sends_before_t0(rate, workers, preopen):
    plans = _plans(rate, workers)
    assert len(plans) == workers
    assert sum(p.rate for p in plans) == pytest.approx(rate)
    assert [p.preopen for p in plans] == [preopen] * workers
    assert all(p.preopen <= p.max_in_flight for p in plans)
    # the workers' schedules are spread over one gap of the whole level's rate
    assert [p.phase_ns for p in plans] == [int(w * 1e9 / rate) for w in range(workers)]
