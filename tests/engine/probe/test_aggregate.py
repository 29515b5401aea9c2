"""Rank figures -> ProbeResult / AllReduceResult, on hand-made records (pure logic)."""

import pytest

from engine.analysis.stats import welch_t_test
from engine.probe.aggregate import (
    Baselines,
    allreduce_result,
    comm_overhead,
    run_times,
    train_results,
)
from engine.probe.jobs import AllReduceJob, TrainJob, View

# scipy.stats (about 0.9 CPU-s to import, in each worker that does): with the torch tests, in one worker
pytestmark = pytest.mark.xdist_group("torch")


def _job(ws: int, strategy: str, views: list[View], per_device: int = 10) -> TrainJob:
    return TrainJob(id=f"m/{strategy}/ws{ws}", model="m", strategy=strategy, world_size=ws,
                    per_device_batch=per_device, precision="fp32", steps=10, warmup_steps=2, repeats=3, views=views)


def _rank(rank: int, run_s: list[float], nosync: float | None = None, mem=None, util=None) -> dict:
    return {"rank": rank, "params": 1234, "run_s": run_s, "nosync_s": nosync, "peak_mem_bytes": mem, "gpu_util": util}


def test_a_run_lasts_as_long_as_its_slowest_rank():
    assert run_times([_rank(0, [1.0, 2.0]), _rank(1, [1.5, 1.0])]) == [1.5, 2.0]


def test_comm_overhead_is_the_share_of_the_step_without_sync():
    # step with sync 0.2 s; no_sync run 10 steps in 1.5 s (slowest rank) -> 0.15 s; (0.2 - 0.15) / 0.2
    ranks = [_rank(0, [], nosync=1.2), _rank(1, [], nosync=1.5)]
    assert comm_overhead(0.2, ranks, 10) == pytest.approx(0.25)
    assert comm_overhead(0.2, [_rank(0, [], nosync=None)], 10) is None


def test_single_device_baseline_then_two_ranks():
    base = Baselines()
    # world size 1: runs of 10 steps x 10 samples in 1.0, 1.0, 1.0 s -> 100 samples/s
    (r1,) = train_results(_job(1, "single", [View("weak", 10)]), [_rank(0, [1.0, 1.0, 1.0])], "cpu", "gloo", base)
    base.add(r1)
    assert r1.samples_per_s.mean == pytest.approx(100.0)
    assert r1.step_time_s.mean == pytest.approx(0.1)
    assert (r1.speedup, r1.efficiency, r1.comm_overhead, r1.p_value) == (1.0, 1.0, None, None)
    assert r1.strategy == "single" and r1.global_batch == 10 and r1.params == 1234
    # world size 2, weak: global 20 per step; runs 1.25, 1.25 and (slowest rank) 1.25 s -> 160 samples/s
    job = _job(2, "ddp", [View("weak", 10)])
    ranks = [_rank(0, [1.25, 1.2, 1.25], nosync=1.0, mem=100, util=80.0),
             _rank(1, [1.2, 1.25, 1.1], nosync=0.9, mem=120, util=90.0)]
    (r2,) = train_results(job, ranks, "cuda", "nccl", base)
    assert r2.samples_per_s.mean == pytest.approx(160.0)
    assert r2.speedup == pytest.approx(1.6)
    assert r2.efficiency == pytest.approx(0.8)  # 160 / (2 x 100)
    assert r2.comm_overhead == pytest.approx((0.125 - 0.1) / 0.125)
    assert r2.peak_mem_bytes == [100, 120] and r2.gpu_util == [80.0, 90.0]
    # the row of seed 002's table in one event: single -> multi
    assert r2.baseline_samples_per_s == r1.samples_per_s
    assert (r2.baseline_step_time_s, r2.baseline_gpu_util) == (pytest.approx(0.1), [])
    assert r1.baseline_samples_per_s is None
    assert (r2.device, r2.backend, r2.global_batch, r2.warmup_steps, r2.repeats) == ("cuda", "nccl", 20, 2, 3)


def test_welch_p_value_and_significance_against_world_size_1():
    base = Baselines()
    (r1,) = train_results(_job(1, "single", [View("weak", 10)]), [_rank(0, [1.0, 1.02, 0.98])], "cpu", "gloo", base)
    base.add(r1)
    (r2,) = train_results(_job(2, "ddp", [View("weak", 10)]), [_rank(0, [1.01, 0.99, 1.03])], "cpu", "gloo", base)
    expected = welch_t_test([20 * 10 / t for t in [1.01, 0.99, 1.03]], [10 * 10 / t for t in [1.0, 1.02, 0.98]])
    assert r2.p_value == pytest.approx(expected.p_value)
    assert r2.significant is True  # 2x the samples/s with ~2 % noise
    # strong scaling, global batch 10 over 2 ranks: ~100 samples/s again, no real difference
    (r3,) = train_results(_job(2, "ddp", [View("strong", 10)], per_device=5),
                          [_rank(0, [0.99, 1.03, 0.97])], "cpu", "gloo", base)
    assert r3.p_value > 0.05 and r3.significant is False


def test_strong_view_compares_with_world_size_1_at_the_global_batch():
    base = Baselines()
    r1, _ = train_results(_job(1, "single", [View("weak", 20), View("strong", 20)], per_device=20),
                          [_rank(0, [2.0, 2.0, 2.0])], "cpu", "gloo", base)
    base.add(r1)
    job = _job(2, "ddp", [View("weak", 10), View("strong", 20)], per_device=10)
    weak, strong = train_results(job, [_rank(0, [1.0, 1.0, 1.0])], "cpu", "gloo", base)
    assert (weak.scaling, strong.scaling) == ("weak", "strong")
    assert weak.speedup is None  # no world-size-1 run at batch 10 in this plan
    assert strong.speedup == pytest.approx(2.0)  # 200 samples/s vs 100
    assert strong.efficiency == pytest.approx(1.0)


def test_allreduce_result_averages_rank_times_and_sets_the_link():
    job = AllReduceJob(id="a", world_size=2, max_bytes=2048)
    ranks = [{"rank": 0, "sizes": [1024, 2048], "time_s": [1e-6, 3e-6], "gpu_name": "NVIDIA H200",
              "nvlink_links": 18, "pcie_gen": 5, "pcie_width": 16},
             {"rank": 1, "sizes": [1024, 2048], "time_s": [3e-6, 5e-6]}]
    res = allreduce_result(job, ranks, "cuda", "nccl")
    assert [r.time_s for r in res.rows] == pytest.approx([2e-6, 4e-6])
    assert res.rows[0].algbw_gbps == pytest.approx(1024 / 2e-6 / 1e9)
    assert res.rows[0].busbw_gbps == pytest.approx(res.rows[0].algbw_gbps)  # n = 2
    assert (res.link, res.link_limit_gbps) == ("NVLink4 x18", 450.0)
    cpu = allreduce_result(job, ranks, "cpu", "gloo")
    assert (cpu.link, cpu.link_limit_gbps) == ("host memory (gloo)", None)
