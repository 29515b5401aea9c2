"""Host CPU per level: a level shorter than the host sampler's interval reads the sample that
covers it (a sample at ts covers the time since the previous one), weighted by the overlap."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.events import HostSample
from engine.record.reader import Recording
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session


def _host_at(events: list, stamps: list[tuple[float, float]]) -> list:
    """The session's events with its host samples replaced by (ts, cpu%) ones."""
    kept = [e for e in events if not isinstance(e, HostSample)]
    samples = [HostSample(ts=ts, cpu_percent=cpu, own_cpu_percent=cpu / 2) for ts, cpu in stamps]
    return sorted(kept + samples, key=lambda e: e.ts)


def test_a_level_shorter_than_the_sampler_interval_reads_the_sample_covering_it(tmp_path: Path) -> None:
    run = SyntheticRun(variant="1x", gpu_count=1, probe=False, levels=[1, 2, 4, 8], window_s=0.1)
    events = synthetic_session(run)
    t0 = run.t0
    # one sample a second (cpu = 10 * its second), each level's 0.3 s measured span inside one of them
    stamps = [(t0 + k, 10.0 * k) for k in range(0, 12)]
    with Recording.open(record_events(tmp_path / "run.sqlite", _host_at(events, stamps))) as rec:
        summary = rec.summary()
    for level in summary.levels:
        assert level.host_cpu_percent is not None, level.result.level
        assert level.own_cpu_percent == pytest.approx(level.host_cpu_percent / 2)
        start, end = level.t_start, level.t_end
        assert start is not None and end is not None and end - start < 1.0
        # the weights: the seconds each covering sample's interval shares with the span
        weights = {k: min(t0 + k, end) - max(t0 + k - 1, start) for k in range(1, 12)}
        weights = {k: w for k, w in weights.items() if w > 0}
        expected = sum(w * 10.0 * k for k, w in weights.items()) / sum(weights.values())
        assert level.host_cpu_percent == pytest.approx(expected)


def test_a_level_with_no_sample_after_it_is_not_measured(tmp_path: Path) -> None:
    run = SyntheticRun(variant="1x", gpu_count=1, probe=False, levels=[1, 2], window_s=0.1)
    events = synthetic_session(run)
    stamps = [(run.t0 + 0.5, 40.0)]  # one sample, before any level: it covers none of them
    with Recording.open(record_events(tmp_path / "run.sqlite", _host_at(events, stamps))) as rec:
        summary = rec.summary()
    assert [lv.host_cpu_percent for lv in summary.levels] == [None, None]


def test_a_samples_first_reading_covers_nothing(tmp_path: Path) -> None:
    run = SyntheticRun(variant="1x", gpu_count=1, probe=False, levels=[1], window_s=0.1)
    events = synthetic_session(run)
    level_end = next(e.ts for e in events if type(e).__name__ == "LevelResult")
    # the only sample after the level has no previous one: its interval is unknown
    stamps = [(level_end + 0.2, 70.0)]
    with Recording.open(record_events(tmp_path / "run.sqlite", _host_at(events, stamps))) as rec:
        assert rec.summary().levels[0].host_cpu_percent is None


def test_a_sample_that_says_its_interval_covers_a_level_with_no_sample_before_it(tmp_path: Path) -> None:
    """The sampler's first published sample (its baseline read is not published) says how long it
    covers: a study's one-level session has no earlier sample to tell."""
    run = SyntheticRun(variant="1x", gpu_count=1, probe=False, levels=[1], window_s=0.1)
    events = [e for e in synthetic_session(run) if not isinstance(e, HostSample)]
    level_end = next(e.ts for e in events if type(e).__name__ == "LevelResult")
    events = sorted(events + [HostSample(ts=level_end + 0.2, cpu_percent=70.0, interval_s=1.0)], key=lambda e: e.ts)
    with Recording.open(record_events(tmp_path / "run.sqlite", events)) as rec:
        assert rec.summary().levels[0].host_cpu_percent == pytest.approx(70.0)
