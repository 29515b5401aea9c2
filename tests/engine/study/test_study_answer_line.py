"""The study's answer line stays short: configs that no sound level decides are named by cause,
their reasons stand above it (the recommendation)."""

from __future__ import annotations

from dataclasses import dataclass

from engine import events as ev
from engine.analysis.answer import Answer, decide
from engine.analysis.slo import parse_slo
from engine.study.figures import undecided_configs


def _level(level: float, status: str, others: float | None = None, p99_ms: float = 10) -> ev.LevelResult:
    lat = ev.LatencyStats(count=100, mean=p99_ms / 2000, p50=p99_ms / 2000, p95=p99_ms / 1200, p99=p99_ms / 1000)
    return ev.LevelResult(mode="concurrency", level=level, index=int(level), status=status, batch_size=1, windows=3,
                          merged_windows=3, requests=100, errors=0, throughput_rps=100.0, throughput_ips=100.0,
                          latency=lat, trial=3, others_cpu=others)


@dataclass
class _Config:  # what undecided_configs reads of a ConfigFigures
    variant: str
    answer: Answer

    @property
    def not_decided(self) -> str:
        return self.answer.not_decided


def test_undecided_configs_are_named_by_cause() -> None:
    slo = parse_slo("p99=50ms")
    cpu = _Config("cpu", decide([_level(1, "stable"), _level(2, "stable")], slo))
    cpu2 = _Config("cpu2", decide([_level(1, "unstable", others=0.66), _level(2, "contended", others=0.7)], slo))
    scale = _Config("cpu*2", decide([_level(1, "unstable")], slo))
    slow = _Config("cpu4", decide([_level(1, "stable", p99_ms=90)], slo))
    assert undecided_configs([cpu]) == ""  # type: ignore[list-item]
    assert undecided_configs([cpu, cpu2, scale]) == "cpu2, cpu*2 (no sound level)"  # type: ignore[list-item]
    line = undecided_configs([cpu2, scale, slow])  # type: ignore[list-item]
    assert line == "cpu2, cpu*2 (no sound level); cpu4 (no level meets p99 <= 50 ms)"
    # the long reasons are still there for the lines above
    assert cpu2.not_decided.startswith("no sound level: concurrency 1 unstable after 3 trials (others took 66 %")
