"""The probe end to end on real torch.distributed ranks (gloo on CPU): tiny sizes, short runs."""

import threading
import time

import pytest

from engine.errors import UserError
from engine.events import AllReduceResult, Error, PhaseChanged, ProbeResult, Warning
from engine.probe.orchestrate import run_allreduce_sweep, run_probe
from engine.profiles import Probe
from tests.engine.probe.conftest import FIXTURES

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cpu_heavy")]  # cpu_heavy: tests/conftest.py


def _tiny(**kw) -> Probe:
    base = dict(models=["transformer_tiny"], strategies=["ddp"], batch_sizes=[4], world_sizes=[1, 2],
                scaling=["weak"], steps=3, warmup_steps=1, repeats=3, timeout_s=60.0)
    return Probe(**{**base, **kw})


def test_ddp_and_fsdp_weak_and_strong_at_1_and_2_ranks(no_ranks_left):
    events = []
    settings = _tiny(strategies=["ddp", "fsdp"], scaling=["weak", "strong"], precision="bf16",
                     allreduce_max_bytes=8192)
    results = run_probe(settings, events.append, threading.Event(), device="cpu", include_allreduce=True)
    published = [e for e in events if isinstance(e, ProbeResult)]
    assert results == published
    got = {(r.strategy, r.scaling, r.world_size, r.per_device_batch) for r in results}
    assert got == {("single", "weak", 1, 4), ("single", "strong", 1, 4),
                   ("ddp", "weak", 2, 4), ("fsdp", "weak", 2, 4), ("ddp", "strong", 2, 2), ("fsdp", "strong", 2, 2)}
    for r in results:
        assert (r.device, r.backend, r.precision, r.params) == ("cpu", "gloo", "bf16", 17_482)
        assert r.samples_per_s.mean > 0 and r.step_time_s.mean > 0
        assert r.samples_per_s.n + r.samples_per_s.n_outliers == 3
        assert r.speedup is not None and r.efficiency == pytest.approx(r.speedup / r.world_size)
        assert r.peak_mem_bytes == [] and r.gpu_util == []  # not available on CPU: empty, never 0
        if r.world_size == 2:
            assert r.comm_overhead is not None and r.p_value is not None and r.significant is not None
    (sweep,) = [e for e in events if isinstance(e, AllReduceResult)]
    assert [row.size_bytes for row in sweep.rows] == [1024, 2048, 4096, 8192]
    assert all(row.time_s > 0 and row.busbw_gbps == pytest.approx(row.algbw_gbps) for row in sweep.rows)
    assert sweep.link == "host memory (gloo)" and sweep.link_limit_gbps is None
    phases = [e.detail for e in events if isinstance(e, PhaseChanged)]
    assert phases[0] == "1 rank(s): transformer_tiny/single/ws1/b4" and "2 rank(s): allreduce/ws2" in phases
    assert not [e for e in events if isinstance(e, Error)]


def test_a_crashing_rank_then_a_hung_rank(no_ranks_left):
    """Crash: reported, the group ended, the next configuration runs in a fresh group.
    Hang: ended within the timeout, the rest of that world size skipped. Results kept."""
    events = []
    models = [f"{FIXTURES}:crash_on_rank1", f"{FIXTURES}:regressor", f"{FIXTURES}:hang_on_rank1", "transformer_tiny"]
    settings = _tiny(models=models, world_sizes=[2], timeout_s=6.0)
    start = time.monotonic()
    results = run_probe(settings, events.append, threading.Event(), device="cpu")
    assert time.monotonic() - start < 100  # two start-ups + 6 s, not the hour the hung rank sleeps
    crash, hang = [e for e in events if isinstance(e, Error)]
    assert "crash_on_rank1" in crash.message and "\n" not in crash.message
    assert "rank 1 failed: RuntimeError: injected failure on rank 1" in crash.message
    assert "hung in tests.engine.probe.probe_fixture_models:hang_on_rank1" in hang.message
    assert "no progress for 6 s" in hang.message
    assert any(isinstance(e, Warning) and "1 configuration(s) at 2 rank(s) skipped" in e.message for e in events)
    assert [r.model for r in results] == [f"{FIXTURES}:regressor"]


def test_stop_ends_the_group_at_once_and_keeps_what_was_measured(no_ranks_left):
    stop = threading.Event()
    events = []

    def publish(event):
        events.append(event)
        if isinstance(event, PhaseChanged) and "hang_everywhere" in event.detail:
            stop.set()  # the user presses stop while a configuration runs (one that would never end)

    settings = _tiny(models=["transformer_tiny", f"{FIXTURES}:hang_everywhere"], world_sizes=[1], timeout_s=120.0)
    start = time.monotonic()
    results = run_probe(settings, publish, stop, device="cpu")
    assert time.monotonic() - start < 60  # not the 120 s timeout
    assert [r.model for r in results] == ["transformer_tiny"]
    assert any(isinstance(e, Warning) and "stopped on request; 1 result(s) kept" in e.message for e in events)
    assert not [e for e in events if isinstance(e, Error)]


def test_allreduce_sweep_on_its_own(no_ranks_left):
    events = []
    sweep = run_allreduce_sweep(2, events.append, threading.Event(), device="cpu", max_bytes=4096)
    assert sweep is not None and events[-1] is sweep
    assert [row.size_bytes for row in sweep.rows] == [1024, 2048, 4096]


def test_bad_input_fails_before_any_process_starts(no_ranks_left):
    with pytest.raises(UserError, match="unknown model 'nope'"):
        run_probe(_tiny(models=["nope"]), lambda e: None, threading.Event(), device="cpu")
    with pytest.raises(UserError, match="needs 2 or more ranks"):
        run_allreduce_sweep(1, lambda e: None, threading.Event(), device="cpu")
    with pytest.raises(UserError, match="torch sees no CUDA device"):
        run_probe(_tiny(), lambda e: None, threading.Event(), device="cuda")


def test_world_size_8_on_gloo(no_ranks_left):
    """The 8-GPU code path as far as this box runs it: 8 real gloo ranks, DDP and the
    all-reduce sweep with busbw = algbw x 2(n-1)/n = 1.75 x algbw."""
    events = []
    settings = _tiny(world_sizes=[1, 8], repeats=2, steps=2, allreduce_max_bytes=4096, timeout_s=120.0)
    results = run_probe(settings, events.append, threading.Event(), device="cpu", include_allreduce=True)
    (eight,) = [r for r in results if r.world_size == 8]
    assert (eight.strategy, eight.global_batch, eight.backend) == ("ddp", 32, "gloo")
    assert eight.samples_per_s.mean > 0 and eight.efficiency == pytest.approx(eight.speedup / 8)
    (sweep,) = [e for e in events if isinstance(e, AllReduceResult)]
    assert sweep.world_size == 8
    assert all(row.busbw_gbps == pytest.approx(row.algbw_gbps * 2 * 7 / 8) for row in sweep.rows)
    assert not [e for e in events if isinstance(e, Error)]
