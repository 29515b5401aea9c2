"""Window boundaries and aggregation of worker ticks (pure)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from engine.load.ticks import Tick
from engine.load.windows import aggregate, merge, window_end

TICK = 250_000_000


def test_window_closes_at_nominal_length_when_it_has_enough_requests():
    # 4 ticks nominal, 50 requests minimum: 20+20+20+20 = 80 >= 50 at 4 ticks
    assert window_end([20, 20, 20, 20, 20], 0, 5, 4, 10, 50) == 4


def test_window_is_not_decided_before_its_ticks_arrive():
    assert window_end([20, 20, 20], 0, 3, 4, 10, 50) is None


def test_window_extends_until_min_requests():
    # 4 ticks give 4 requests; the 5th tick brings 46 more -> 50
    assert window_end([1, 1, 1, 1, 46, 9], 0, 6, 4, 10, 50) == 5


def test_window_extension_is_capped():
    assert window_end([1] * 12, 0, 12, 4, 6, 50) == 6
    assert window_end([1] * 5, 0, 5, 4, 6, 50) is None


def test_window_starting_later():
    assert window_end([0, 0, 30, 30, 0, 0], 2, 6, 2, 4, 50) == 4


def test_window_end_rejects_bad_lengths():
    with pytest.raises(ValueError):
        window_end([1], 0, 1, 0, 4, 1)
    with pytest.raises(ValueError):
        window_end([1], 0, 1, 4, 2, 1)


def _tick(worker, k, lat_ms, errors=None, cpu_ms=0, lag_ms=(), sent=None, late=0, unc_ms=None):
    return Tick(
        worker=worker, level_index=0, tick=k, ok=len(lat_ms),
        latency_ns=np.array([int(x * 1e6) for x in lat_ms], np.int64),
        latency_uncorrected_ns=None if unc_ms is None else np.array([int(x * 1e6) for x in unc_ms], np.int64),
        errors=dict(errors or {}), messages={kind: [f"{kind} message"] for kind in (errors or {})},
        sent=len(lat_ms) if sent is None else sent, late=late, cpu_ns=int(cpu_ms * 1e6),
        lag_ns=np.array([int(x * 1e6) for x in lag_ms], np.int64),
    )


def test_aggregate_sums_the_ticks_of_every_worker_in_range():
    ticks = [
        _tick(0, 0, [1, 2], cpu_ms=10),
        _tick(1, 0, [3], errors={"timeout": 1}, cpu_ms=20),
        _tick(0, 1, [4], errors={"server_error": 2}, cpu_ms=30, lag_ms=[0.5]),
        _tick(1, 1, [5, 6], cpu_ms=40, lag_ms=[0.1, 0.2]),
        _tick(0, 2, [100], cpu_ms=999),  # outside [0, 2)
    ]
    agg = aggregate(ticks, 0, 2, TICK, rate_mode=False)
    assert agg.duration_s == pytest.approx(0.5)
    assert agg.ok == 6
    assert agg.errors == {"timeout": 1, "server_error": 2}
    assert agg.error_count == 3 and agg.completed == 9
    assert sorted(agg.latency_ns.tolist()) == [int(x * 1e6) for x in (1, 2, 3, 4, 5, 6)]
    assert agg.cpu_ns == {0: 40_000_000, 1: 60_000_000}
    assert agg.lag_ns[1].tolist() == [100_000, 200_000]
    assert agg.uncorrected_ns is None
    assert agg.messages == {"timeout": ["timeout message"], "server_error": ["server_error message"]}


def test_merge_adds_durations_and_samples():
    ticks = [_tick(0, k, [k + 1], unc_ms=[k + 0.5], late=k) for k in range(4)]
    a = aggregate(ticks, 0, 2, TICK, rate_mode=True)
    b = aggregate(ticks, 2, 4, TICK, rate_mode=True)
    m = merge([a, b], rate_mode=True)
    assert m.duration_s == pytest.approx(1.0)
    assert m.ok == 4 and m.sent == 4 and m.late == 0 + 1 + 2 + 3
    assert sorted(m.latency_ns.tolist()) == [1_000_000, 2_000_000, 3_000_000, 4_000_000]
    assert sorted(m.uncorrected_ns.tolist()) == [500_000, 1_500_000, 2_500_000, 3_500_000]
    assert (m.start_tick, m.end_tick) == (0, 4)


def test_tick_length_divides_short_windows():
    from engine.load.sweep import tick_for

    assert tick_for(5000) == 250_000_000
    assert tick_for(1000) == 250_000_000
    assert tick_for(300) == 75_000_000
    assert tick_for(10) == 10_000_000


def test_workers_rule():
    from engine.load.workers_rule import pool_size, workers_for_level
    from engine.profiles import Load

    auto = Load()
    assert pool_size(auto, 2) == 1 and pool_size(auto, 16) == 4
    assert [workers_for_level(auto, c, 4) for c in (1, 8, 32, 33, 64, 128, 4096)] == [1, 1, 1, 2, 2, 4, 4]
    rate = Load(mode="rate", rates=[100.0])
    assert [workers_for_level(rate, r, 4) for r in (100.0, 5000.0, 5001.0, 1e6)] == [1, 1, 2, 4]
    # a 602 KB image (the embedded ViT-B/32): one worker per 4 connections, per 500 requests/s
    image = 3 * 224 * 224 * 4 + 500
    assert [workers_for_level(auto, c, 64, image) for c in (1, 4, 5, 16, 64, 512)] == [1, 1, 2, 4, 16, 64]
    assert [workers_for_level(rate, r, 64, image) for r in (400.0, 1000.0, 4000.0)] == [1, 2, 8]
    assert workers_for_level(auto, 64, 64, 64 * 1024) == 2  # up to 64 KiB: the mode's own share
    fixed = Load(workers=3)
    assert pool_size(fixed, 2) == 3
    assert workers_for_level(fixed, 64, 3, image) == 3
    assert [workers_for_level(fixed, c, 3) for c in (1, 2, 8)] == [1, 2, 3]
    assert workers_for_level(Load(mode="rate", rates=[1.0], workers=3), 1.0, 3) == 3


def test_the_pool_counts_the_cores_this_process_may_use():
    from engine.hostinfo import process_cores

    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(before)})  # as taskset or a container's cpuset leaves it
        assert process_cores() == 1
    finally:
        os.sched_setaffinity(0, before)
    assert process_cores() == len(before)
