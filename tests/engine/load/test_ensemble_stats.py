"""An ensemble's server breakdown: its steps' queue and compute times, as perf_analyzer reads them.
Triton 2.51 adds the steps' compute to the ensemble's own counters but not their queue time, which
it leaves at the ensemble scheduler's microsecond."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine.triton.server_stats import (
    PARTS,
    StatsSnapshot,
    breakdown,
    ensemble_snapshot,
    ensemble_steps,
)
from engine.triton.target import Target, describe_target
from tests.engine.load.conftest import quick_load, sweep

DATA = Path(__file__).resolve().parents[2] / "data" / "datacheck_ensemble_input.json"


def _snap(success: int, ns: dict[str, int], inferences: int = 0, executions: int = 0) -> StatsSnapshot:
    return StatsSnapshot(inferences, executions, dict.fromkeys(PARTS, success), {p: ns.get(p, 0) for p in PARTS})


def test_steps_of_an_ensemble_config_and_none_for_other_models():
    config = {"platform": "ensemble", "ensemble_scheduling": {"step": [{"model_name": "a"}, {"model_name": "b"}]}}
    assert ensemble_steps(config) == ("a", "b")
    assert ensemble_steps({"backend": "python"}) == ()
    assert ensemble_steps({"platform": "ensemble", "ensemble_scheduling": "nonsense"}) == ()


def test_an_ensembles_queue_and_compute_are_its_steps_summed_per_request():
    top0, top1 = _snap(0, {"success": 0}), _snap(10, {"success": 10_000_000, "queue": 10_000})
    a0, a1 = _snap(0, {}), _snap(10, {"queue": 500_000, "compute_infer": 3_000_000}, inferences=10, executions=5)
    b0, b1 = _snap(0, {}), _snap(10, {"queue": 200_000, "compute_infer": 1_000_000}, inferences=10, executions=10)
    got = breakdown(ensemble_snapshot(top0, [a0, b0]), ensemble_snapshot(top1, [a1, b1]), client_mean_s=0.002)
    assert got is not None and got.request_count == 10
    assert got.queue == pytest.approx(70e-6)  # (500 + 200) µs over 10 requests
    assert got.compute_infer == pytest.approx(400e-6)
    assert got.server_total == pytest.approx(1e-3)  # the ensemble's own end-to-end time
    assert got.avg_batch_size == pytest.approx(2.0)  # the first step's batches


def test_a_step_without_statistics_leaves_the_ensembles_own():
    top = _snap(10, {"success": 10_000_000, "queue": 10_000})
    assert ensemble_snapshot(top, [None, _snap(10, {"queue": 1})]) is top


@pytest.mark.slow
def test_a_sweep_of_an_ensemble_reports_its_steps_times(shapes_server):
    target = Target(shapes_server.http_url, "datacheck_ensemble")
    info = asyncio.run(describe_target(target))
    server = None
    for _ in range(4):  # a busy box can answer the statistics too late: said, then measured again
        results, events = asyncio.run(sweep(target, info, quick_load(input_data=str(DATA))))
        (level,) = results
        assert level.errors == 0 and level.requests > 0, level.error_messages
        server = level.server
        if server is not None:
            break
        assert any(w.key == f"late-stats-{level.index}" for w in events.of("warning")), "no breakdown, and none said why"
    assert server is not None, "the statistics came late in every one of 4 sweeps"
    assert server.compute_infer is not None and server.compute_infer > 0 and server.server_total is not None
    # the steps' queues (hundreds of µs here), not the ensemble scheduler's own (about 1 µs)
    assert server.queue is not None and server.queue > 20e-6, server
