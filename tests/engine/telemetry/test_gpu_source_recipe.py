"""The recipe for a telemetry source (docs/architecture.md, "A telemetry source"): a class that
matches GpuSource and one registration. Here both live in this file, so adding the source
touches one file: a fixed-reading source, registered for the test only, runs in the real
sampler (real threads, real host readings beside it); its readings arrive as GpuSample events
and land in a real recording's gpu_samples table."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.events import GpuReading, GpuSample, HostSample, Warning
from engine.record.reader import Recording
from engine.record.recorder import Recorder
from engine.telemetry.gpu_source import GpuSource, SourceContext, TelemetrySettings
from engine.telemetry.registry import GPU_SOURCES
from engine.telemetry.sampler import TelemetrySampler
from tests.engine.telemetry.test_sampler import Collector


class FixedSource(GpuSource):
    """One GPU that always reads the same: 42 % busy at 123 W."""

    name = "fixed"
    interval_s = 0.1
    read_at_stop = True

    def __init__(self) -> None:
        self.opened = self.closed = False

    def open(self, ctx: SourceContext) -> bool:
        self.opened = True
        return True

    def read(self) -> list[GpuReading] | None:
        return [GpuReading(uuid="GPU-fixed-0", index=0, source=self.name, name="Fixed GPU",
                           util_gpu=42.0, power_w=123.0, mem_used=1 << 30, mem_total=8 << 30)]

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fixed_sources() -> Iterator[list[FixedSource]]:
    """Registers FixedSource for the test; the list holds each one the sampler made."""
    made: list[FixedSource] = []

    def factory(settings: TelemetrySettings) -> FixedSource:
        made.append(FixedSource())
        return made[-1]

    GPU_SOURCES.register("fixed", factory)
    try:
        yield made
    finally:
        GPU_SOURCES.unregister("fixed")


def test_a_registered_source_runs_in_the_sampler_and_is_recorded(fixed_sources, tmp_path: Path):
    path = tmp_path / "fixed.sqlite"
    recorder = Recorder(path)
    got = Collector()

    def publish(event):  # noqa: ANN001, ANN202 - the bus's signature
        got(event)
        recorder(event)

    sampler = TelemetrySampler(publish, use_nvml=False, host_interval_s=0.2)
    assert "fixed" in GPU_SOURCES.names()
    sampler.start()
    try:
        got.wait_for(GpuSample, 3)
    finally:
        sampler.stop()
        recorder.close()
    assert not sampler.running

    (source,) = fixed_sources
    assert source.opened and source.closed
    samples = got.of(GpuSample)
    assert len(samples) >= 3
    assert {(s.source, s.interval_s) for s in samples} == {("fixed", 0.1)}
    assert [(g.uuid, g.util_gpu, g.power_w) for g in samples[0].gpus] == [("GPU-fixed-0", 42.0, 123.0)]
    stamps = [s.ts for s in samples]
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] >= 0.1
    assert got.of(HostSample)  # the host is read beside it
    assert got.of(Warning) == []

    with Recording.open(path) as recording:
        rows = list(recording.query(
            "SELECT g.uuid, g.source, s.util, s.power FROM gpu_samples s JOIN gpus g ON g.id = s.gpu"))
        recorded = [e for e in recording.events(("gpu_sample",))]
    assert len(rows) == len(samples) and set(rows) == {("GPU-fixed-0", "fixed", 42.0, 123.0)}
    assert recorded == samples


def test_a_source_that_is_not_asked_for_is_not_run(fixed_sources):
    GPU_SOURCES.unregister("fixed")
    GPU_SOURCES.register("fixed", lambda settings: None)  # a factory says "not this run"
    got = Collector()
    sampler = TelemetrySampler(got, use_nvml=False, host_interval_s=0.1)
    sampler.start()
    try:
        got.wait_for(HostSample, 2)
        threads = {t.name for t in threading.enumerate() if t.name.startswith("telemetry-")}
        time.sleep(0.2)
    finally:
        sampler.stop()
    assert threads == {"telemetry-host"}
    assert got.of(GpuSample) == [] and len(got.of(HostSample)) >= 2


def test_names_are_unique_in_the_registry():
    assert GPU_SOURCES.names()[:2] == ["nvml", "triton"]
    with pytest.raises(ValueError, match="already registered"):
        GPU_SOURCES.register("nvml", lambda settings: None)


def test_a_source_faster_than_the_sampler_allows_is_a_user_error(fixed_sources):
    fast = FixedSource()
    fast.interval_s = 0.01
    GPU_SOURCES.unregister("fixed")
    GPU_SOURCES.register("fixed", lambda settings: fast)
    sampler = TelemetrySampler(lambda e: None, use_nvml=False)
    with pytest.raises(UserError, match="telemetry source fixed: interval must be at least") as info:
        sampler.start()
    assert "\n" not in str(info.value) and not sampler.running
