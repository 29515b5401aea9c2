import pytest

from engine.analysis.gates import evaluate_gates, merge_gates, parse_p99_gates
from engine.errors import UserError
from engine.events import LatencyStats, LevelResult
from engine.profiles import Gates


def result(level: float, ips: float, p99_ms: float, status: str = "stable") -> LevelResult:
    requests = 0 if status == "failed" else 100
    return LevelResult(mode="concurrency", level=level, index=0, status=status, batch_size=1, windows=3,
                       merged_windows=3, requests=requests, errors=0, throughput_rps=ips, throughput_ips=ips,
                       latency=LatencyStats(count=requests, p99=None if status == "failed" else p99_ms / 1000))


LEVELS = [result(1, 100, 12.0), result(16, 900, 40.0), result(64, 950, 180.0), result(128, 0, 0, "failed")]


def test_no_gates_no_failures() -> None:
    assert evaluate_gates(Gates(), LEVELS) == []


def test_passing_gates() -> None:
    gates = Gates(min_throughput=950, max_p99_ms={"16": 40.0, "64": 200}, min_efficiency=0.8)
    assert evaluate_gates(gates, LEVELS, efficiency=0.85) == []


def test_each_gate_fails_with_its_reason() -> None:
    gates = Gates(min_throughput=1000, max_p99_ms={"64": 150, "32": 100, "128": 500}, min_efficiency=0.9)
    failures = evaluate_gates(gates, LEVELS, efficiency=0.85)
    assert failures == [
        "min_throughput: best 950/s (at 64) < 1000/s",
        "max_p99_ms at 32: level 32 was not measured",
        "max_p99_ms at 64: p99 180 ms > 150 ms",
        "max_p99_ms at 128: the level failed without a p99 latency",
        "min_efficiency: 0.850 < 0.9",
    ]


def test_a_gate_that_cannot_be_checked_fails() -> None:
    assert evaluate_gates(Gates(min_efficiency=0.8), LEVELS, efficiency=None)[0].startswith("min_efficiency 0.8: no")
    assert evaluate_gates(Gates(min_throughput=1), []) == ["min_throughput 1/s: no level produced a result"]


def test_bad_level_key_is_a_user_error() -> None:
    with pytest.raises(UserError, match="not a number"):
        evaluate_gates(Gates(max_p99_ms={"fast": 10}), LEVELS)


def test_command_line_gates_override_the_profile() -> None:
    base = Gates(min_throughput=500, max_p99_ms={"16": 50.0, "64.0": 300})
    merged = merge_gates(base, max_p99_ms=parse_p99_gates(["64=250", "128:900"]), min_efficiency=0.7)
    assert merged.min_throughput == 500 and merged.min_efficiency == 0.7
    assert merged.max_p99_ms == {"16": 50.0, "64": 250.0, "128": 900.0}
    for bad in (["64"], ["64=abc"], ["x=5"], ["64=-1"]):
        with pytest.raises(UserError):
            parse_p99_gates(bad)
    with pytest.raises(UserError):
        merge_gates(base, min_throughput=-5)
