"""Planning: which measurements a probe profile asks for."""

from engine.probe.jobs import AllReduceJob, View, job_from_dict, job_to_dict, plan_training
from engine.profiles import Probe


def _settings(**kw) -> Probe:
    base = dict(models=["m"], strategies=["ddp"], batch_sizes=[32], world_sizes=[1, 2, 4], scaling=["weak"])
    return Probe(**{**base, **kw})


def test_weak_scaling_keeps_the_per_device_batch():
    plan, warnings = plan_training(_settings(), [4, 1, 2])
    assert list(plan) == [1, 2, 4]  # ascending: the baseline first
    assert [(j.strategy, j.per_device_batch, j.global_batch) for ws in plan for j in plan[ws]] == [
        ("single", 32, 32), ("ddp", 32, 64), ("ddp", 32, 128)]
    assert warnings == []


def test_strong_scaling_splits_the_global_batch_and_warns_when_it_cannot():
    plan, warnings = plan_training(_settings(scaling=["strong"], batch_sizes=[6]), [1, 2, 4])
    assert [(j.world_size, j.per_device_batch) for ws in plan for j in plan[ws]] == [(1, 6), (2, 3)]
    assert warnings == ["strong scaling: global batch 6 does not split over 4 devices; skipped"]


def test_one_measurement_serves_every_view_it_answers():
    # weak b=32 at N=2 is per device 32; strong b=64 at N=2 is also per device 32
    plan, _ = plan_training(_settings(scaling=["weak", "strong"], batch_sizes=[32, 64], world_sizes=[1, 2]), [1, 2])
    ws1 = {j.per_device_batch: j.views for j in plan[1]}
    assert ws1 == {32: [View("weak", 32), View("strong", 32)], 64: [View("weak", 64), View("strong", 64)]}
    ws2 = {j.per_device_batch: j.views for j in plan[2]}
    assert ws2 == {32: [View("weak", 32), View("strong", 64)], 64: [View("weak", 64)], 16: [View("strong", 32)]}


def test_world_size_1_runs_once_whatever_the_strategies():
    plan, _ = plan_training(_settings(strategies=["ddp", "fsdp"]), [1, 2])
    assert [j.strategy for j in plan[1]] == ["single"]
    assert [j.strategy for j in plan[2]] == ["ddp", "fsdp"]


def test_warmup_always_covers_step_one():
    plan, _ = plan_training(_settings(warmup_steps=0), [1])
    assert plan[1][0].warmup_steps == 1


def test_jobs_round_trip_through_json_dicts():
    plan, _ = plan_training(_settings(scaling=["weak", "strong"]), [2])
    job = plan[2][0]
    assert job_from_dict(job_to_dict(job)) == job
    ar = AllReduceJob(id="a", world_size=2, max_bytes=4096)
    assert job_from_dict(job_to_dict(ar)) == ar
