"""Streaming figures and the decoupled-model refusal, as pure functions (the real server's side:
test_streaming_models.py)."""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from engine import columns
from engine import events as ev
from engine.errors import UserError
from engine.load.ticks import Tick
from engine.load.windows import aggregate, merge, stream_stats
from engine.transport_table import TRANSPORTS, is_decoupled
from engine.triton.transports import check_streaming

DECOUPLED = {"model_transaction_policy": {"decoupled": True}}


def test_decoupled_is_read_from_the_model_config() -> None:
    assert is_decoupled(DECOUPLED)
    assert not is_decoupled({"model_transaction_policy": {"decoupled": False}})
    assert not is_decoupled({})
    assert not is_decoupled({"model_transaction_policy": "decoupled"})


@pytest.mark.parametrize("name", [t.name for t in TRANSPORTS.values() if not t.streams and t.api == "triton"])
def test_unary_transports_refuse_a_decoupled_model_in_one_line(name: str) -> None:
    with pytest.raises(UserError) as caught:
        check_streaming(name, "toy_llm", DECOUPLED)
    assert str(caught.value) == (f"model 'toy_llm' is decoupled (it streams its responses): load.transport "
                                 f"{name!r} cannot carry that; use one of: grpc_stream, generate_stream")
    check_streaming(name, "identity", {})  # a unary model passes


@pytest.mark.parametrize("name", ["grpc_stream", "generate_stream"])
def test_a_streaming_transport_takes_a_decoupled_model(name: str) -> None:
    check_streaming(name, "toy_llm", DECOUPLED)


def _tick(tick: int, ttft: list[int], responses: list[int], decode: list[int], itl: list[int]) -> Tick:
    return Tick(0, 0, tick, ok=len(ttft), latency_ns=array("q", [t + d for t, d in zip(ttft, decode, strict=True)]),
                ttft_ns=array("q", ttft), responses=array("q", responses), decode_ns=array("q", decode),
                itl_ns=array("q", itl))


def test_stream_stats_over_merged_windows() -> None:
    ms = 1_000_000
    first = aggregate([_tick(0, [10 * ms, 20 * ms], [3, 5], [20 * ms, 40 * ms], [10 * ms] * 6)], 0, 1, 10**9, False)
    second = aggregate([_tick(1, [30 * ms], [1], [0], [])], 1, 2, 10**9, False)
    stats = stream_stats(merge([first, second], False))
    assert stats is not None
    assert stats.ttft.count == 3 and stats.ttft.p50 == pytest.approx(0.020)
    assert stats.itl.count == 6 and stats.itl.p99 == pytest.approx(0.010)
    assert stats.responses_per_request == pytest.approx(3.0)
    assert stats.output_tokens_per_s == pytest.approx(9 / 2.0)
    # per request (responses - 1) / decode time: 2/0.02 = 100 and 4/0.04 = 100; one response alone has no rate
    assert stats.tokens_per_s_per_request == pytest.approx(100.0)


def test_a_unary_sweep_has_no_stream_figures() -> None:
    agg = aggregate([Tick(0, 0, 0, ok=2, latency_ns=array("q", [1, 2]))], 0, 1, 10**9, False)
    assert agg.stream is None and stream_stats(agg) is None


def test_a_level_result_without_stream_reads_as_before() -> None:
    result = ev.LevelResult(mode="concurrency", level=1, index=0, status="stable", batch_size=1, windows=3,
                            merged_windows=3, requests=10, errors=0, throughput_rps=1.0, throughput_ips=1.0,
                            latency=ev.LatencyStats(count=0))
    data = result.to_dict()
    back = ev.event_from_dict(data)
    assert back.stream is None
    data.pop("stream", None)  # a recording made before streaming had no such field
    assert ev.event_from_dict(data).stream is None


def test_stream_stats_round_trip_the_recording() -> None:
    stats = ev.StreamStats(ttft=ev.LatencyStats(count=1, p50=0.01), itl=ev.LatencyStats(count=2, p99=0.002),
                           responses_per_request=8.0, output_tokens_per_s=800.0, tokens_per_s_per_request=100.0)
    result = ev.LevelResult(mode="concurrency", level=1, index=0, status="stable", batch_size=1, windows=3,
                            merged_windows=3, requests=10, errors=0, throughput_rps=100.0, throughput_ips=100.0,
                            latency=ev.LatencyStats(count=0), stream=stats)
    assert ev.event_from_dict(result.to_dict()).stream == stats


def test_streaming_columns_follow_the_request_latency() -> None:
    keys = [c.key for c in columns.with_stream(columns.SWEEP_SCREEN)]
    at = keys.index("p99")
    assert keys[at + 1 : at + 6] == list(columns.STREAM_KEYS)
    figures = columns.LevelFigures(mode="concurrency", level=1, status="stable", stream=ev.StreamStats(
        ttft=ev.LatencyStats(count=1, p50=0.0123, p99=0.0456), itl=ev.LatencyStats(count=1, p50=0.001, p99=0.002),
        responses_per_request=8, output_tokens_per_s=1234.0))
    cells = columns.cells(columns.SWEEP, figures)
    assert cells["ttft_p99"] != cells["ttft_p50"] and cells["tokens"] != columns.fmt.NA
    assert np.isfinite(figures.stream.output_tokens_per_s)
