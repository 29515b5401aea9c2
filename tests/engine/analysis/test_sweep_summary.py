import pytest

from engine.analysis.sweep_summary import cost_at_peak, peak, points_from_results, scaling_vs_base
from engine.events import LatencyStats, LevelResult


def result(level: float, ips: float, status: str = "stable", requests: int = 100, p99: float = 0.01) -> LevelResult:
    return LevelResult(mode="concurrency", level=level, index=0, status=status, batch_size=1, windows=3,
                       merged_windows=3, requests=requests, errors=0, throughput_rps=ips, throughput_ips=ips,
                       latency=LatencyStats(count=requests, mean=p99 / 2, p50=p99 / 2, p95=p99 * 0.9, p99=p99))


def test_points_skip_failed_and_empty_levels_and_sort() -> None:
    pts = points_from_results([result(8, 300), result(1, 50), result(4, 0, "failed", 0), result(2, 0, requests=0)])
    assert [(p.level, p.throughput) for p in pts] == [(1, 50), (8, 300)]


def test_scaling_against_the_1x_base() -> None:
    base = points_from_results([result(1, 100), result(4, 200), result(8, 200)])
    run4 = points_from_results([result(1, 100), result(4, 400), result(8, 700), result(16, 720)])
    figures = scaling_vs_base(run4, base, 4)
    assert figures.speedup == pytest.approx(720 / 200)  # peaks: 720 vs 200
    assert figures.efficiency == pytest.approx(720 / (4 * 200))  # 0.9
    # level by level where both ran: 1 -> 100/(4x100), 4 -> 400/(4x200), 8 -> 700/(4x200); 16 has no base
    assert figures.by_level == {1: pytest.approx(0.25), 4: pytest.approx(0.5), 8: pytest.approx(0.875), 16: None}


def test_peak_and_cost() -> None:
    pts = points_from_results([result(1, 100), result(2, 250), result(4, 250)])
    assert peak(pts).level == 2  # a tie goes to the lower level
    # $3.60/hr at 250 images/s: 3.6 / (250 x 3600) x 1000 = 0.004
    assert cost_at_peak(pts, 3.6) == pytest.approx(0.004)
    assert cost_at_peak(pts, None) is None and cost_at_peak([], 3.6) is None
