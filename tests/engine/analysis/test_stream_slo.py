"""Objectives of a streaming sweep and its goodput (pure)."""

from __future__ import annotations

import pytest

from engine import events as ev
from engine.analysis.scaling import cost_per_million_tokens
from engine.analysis.stream_slo import Slo, goodput, goodput_line, misses, parse_slos
from engine.errors import UserError
from engine.profiles import profile_from_dict


def _level(level: float, status: str, rps: float, ttft_p99: float, itl_p99: float, latency_p99: float,
           tokens_per_s: float | None = None) -> ev.LevelResult:
    stream = ev.StreamStats(ttft=ev.LatencyStats(count=10, p99=ttft_p99), itl=ev.LatencyStats(count=70, p99=itl_p99),
                            responses_per_request=8, output_tokens_per_s=tokens_per_s if tokens_per_s else rps * 8)
    return ev.LevelResult(mode="concurrency", level=level, index=int(level), status=status, batch_size=1, windows=3,
                          merged_windows=3, requests=100, errors=0, throughput_rps=rps, throughput_ips=rps,
                          latency=ev.LatencyStats(count=100, p99=latency_p99), stream=stream)


def test_objectives_are_read_with_their_units() -> None:
    assert parse_slos("ttft_p99=200ms, itl_p95=0.05s,latency_p50=2s") == (
        Slo("ttft", 99, 0.2), Slo("itl", 95, 0.05), Slo("latency", 50, 2.0))
    assert parse_slos("") == ()
    assert parse_slos(["ttft_p99=200ms", "itl_p99=50ms"]) == (Slo("ttft", 99, 0.2), Slo("itl", 99, 0.05))
    profile_from_dict({"name": "x", "load": {"slo": ["ttft_p99=200ms", "itl_p99=50ms"]}}, "test")


@pytest.mark.parametrize("text", ["ttft=200ms", "ttft_p98=1s", "tpot_p99=1ms", "ttft_p99=200", "ttft_p99=0ms",
                                  "ttft_p99=1ms,ttft_p99=2ms"])
def test_a_bad_objective_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_slos(text)
    with pytest.raises(UserError, match="load.slo"):
        profile_from_dict({"name": "x", "load": {"slo": text}}, "test")


def test_goodput_is_the_best_stable_level_meeting_every_objective() -> None:
    slos = parse_slos("ttft_p99=200ms,itl_p99=50ms")
    levels = [
        _level(1, "stable", 10, 0.05, 0.01, 0.2),
        _level(4, "stable", 30, 0.15, 0.04, 0.5),
        _level(8, "unstable", 45, 0.1, 0.03, 0.5),  # meets them, but decides nothing
        _level(16, "stable", 50, 0.35, 0.04, 0.9),  # TTFT too slow
    ]
    assert misses(levels[3], slos) == ["ttft_p99"]
    best = goodput(levels, slos)
    assert best is not None and best.level.level == 4 and best.requests_per_s == 30 and best.tokens_per_s == 240
    assert goodput(levels[3:], slos) is None


def test_a_unary_level_has_no_ttft_to_meet() -> None:
    unary = _level(1, "stable", 10, 0.05, 0.01, 0.2)
    unary.stream = None
    assert misses(unary, parse_slos("ttft_p99=1s")) == ["ttft_p99"]
    assert misses(unary, parse_slos("latency_p99=1s")) == []


def test_the_goodput_line_prices_the_tokens() -> None:
    levels = [_level(4, "stable", 30, 0.15, 0.04, 0.5, tokens_per_s=240.0)]
    line = goodput_line(levels, "ttft_p99=200ms,itl_p99=50ms", cost_per_hour=3.6)
    assert line is not None
    assert line.startswith("goodput (ttft_p99 ≤ 200 ms, itl_p99 ≤ 50.0 ms): 30.0 req/s, 240.0 tok/s at level 4, $4.17 per")
    assert cost_per_million_tokens(3.6, 240.0) == pytest.approx(3.6 / (240 * 3600) * 1e6)
    assert "per million output tokens at $3.6/h" in line
    assert goodput_line(levels, "ttft_p99=10ms") == "goodput (ttft_p99 ≤ 10.0 ms): no stable level meets them"
    assert goodput_line(levels, "") is None


def test_the_cli_flag_is_the_profile_key() -> None:
    import argparse

    from tui.commands.flags import slo_override as _slo_override

    assert _slo_override(argparse.Namespace(slo="ttft_p99=200ms,itl_p99=50ms")) == ['load.slo="ttft_p99=200ms,itl_p99=50ms"']
    assert _slo_override(argparse.Namespace(slo=None)) == []
