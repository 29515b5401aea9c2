"""The report's time axis: windows, level boundaries and GPU traces read back from a recording
written by the real Recorder (a synthetic session: the figures are test inputs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import events as ev
from engine.record.reader import Recording
from engine.record.timelines import read_timelines
from tests.engine.record.synthetic_recordings import SyntheticRun, make_recording, synthetic_session


def test_each_window_and_level_start_is_on_the_time_axis(recording_4x: Path) -> None:
    events = synthetic_session(SyntheticRun(capacity_per_gpu_ips=150.0))
    t0 = events[0].ts
    windows = [e for e in events if isinstance(e, ev.WindowResult)]
    starts = [e for e in events if isinstance(e, ev.LevelStarted)]
    with Recording.open(recording_4x) as r:
        t = read_timelines(r)
    assert not t.bucketed
    assert [(w.t, w.throughput_ips, w.p50, w.p99, w.warmup) for w in t.windows] == [
        (pytest.approx(w.t_end - t0), w.throughput_ips, w.latency.p50, w.latency.p99, w.warmup) for w in windows]
    assert [(b.t, b.label) for b in t.boundaries] == [(pytest.approx(s.ts - t0), str(int(s.level))) for s in starts]
    assert [g.label for g in t.gpus] == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]
    # at 1 Hz for about 3.5 minutes: one bucket per second or so, each GPU's power 50 + 250 x load
    gpu0 = t.gpus[0]
    assert 100 <= len(gpu0.power) <= 300 and len(gpu0.util) == len(gpu0.power) == len(gpu0.mem)
    assert min(p for _t, p in gpu0.power) == pytest.approx(50.0) and max(p for _t, p in gpu0.power) <= 300.0
    assert {m for _t, m in gpu0.mem} == {3_000_000_000}
    assert [x for x, _p in gpu0.power] == sorted(x for x, _p in gpu0.power)


def test_a_long_recording_is_bucketed_keeping_each_buckets_worst_p99(tmp_path: Path) -> None:
    run = SyntheticRun(levels=[1, 2, 4, 8], windows_per_level=20, window_s=1.0, probe=False, telemetry_hz=0.5)
    path = make_recording(tmp_path, "long.sqlite", run)
    windows = [e for e in synthetic_session(run) if isinstance(e, ev.WindowResult)]
    with Recording.open(path) as r:
        t = read_timelines(r, points=10)
    assert t.bucketed and len(t.windows) <= 10
    assert max(w.p99 for w in t.windows if w.p99 is not None) == max(w.latency.p99 for w in windows)
    assert len(t.boundaries) == 4
    assert all(len(g.util) <= 10 for g in t.gpus)
