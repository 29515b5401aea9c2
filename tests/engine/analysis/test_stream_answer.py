"""A streaming sweep's answer by the one rule (pure): the peak is the sound level with the most
output tokens/s, the SLO point is load.slo's goodput over sound levels, the line says tokens/s
and $ per million output tokens (never images or $ per 1000); scale out or up in $ per million
tokens; token counts read from an output; synthetic prompt lengths."""

from __future__ import annotations

import random

import msgspec
import pytest

from engine import events as ev
from engine.analysis.answer import AnswerFold, decide
from engine.analysis.scale_out import SCALE_OUT, SCALE_UP, Figure, Side, scale_answer
from engine.analysis.scaling import cost_per_million_tokens
from engine.analysis.stream_slo import goodput, parse_slos
from engine.length_spec import LengthSpec
from engine.net.connection import StreamTimes
from engine.profiles import token_count
from engine.triton.input_synthetic import lengths
from engine.triton.transports import json_token_count, raw_token_count


def _level(level: float, tokens_per_s: float, rps: float, ttft_p99: float = 0.05, status: str = "stable",
           remeasure: str = "") -> ev.LevelResult:
    stream = ev.StreamStats(ttft=ev.LatencyStats(count=10, p99=ttft_p99), itl=ev.LatencyStats(count=70, p99=0.01),
                            responses_per_request=8, output_tokens_per_s=tokens_per_s)
    return ev.LevelResult(mode="concurrency", level=level, index=int(level), status=status, batch_size=1, windows=3,
                          merged_windows=3, requests=100, errors=0, throughput_rps=rps, throughput_ips=rps,
                          latency=ev.LatencyStats(count=100, p99=0.2), stream=stream, remeasure=remeasure)


def test_the_peak_is_the_sound_level_with_the_most_tokens() -> None:
    # level 8 answers more requests, level 4 more tokens (longer answers): tokens decide
    levels = [_level(4, tokens_per_s=900.0, rps=50.0), _level(8, tokens_per_s=700.0, rps=60.0),
              _level(16, tokens_per_s=2000.0, rps=90.0, status="unstable")]
    answer = decide(levels, cost_per_hour=3.6)
    assert answer.best is not None and answer.best.level == 4
    assert answer.streaming and answer.tokens_per_s == 900.0
    assert answer.cost_per_1000 is None  # never per image for a stream
    assert answer.cost_per_million_tokens == pytest.approx(3.6 / (900 * 3600) * 1e6)
    line = answer.line
    assert line.startswith("answer: peak, CPU: 900.0 tokens/s at concurrency 4 (p99 200 ms, TTFT p99 50.0 ms), $1.11 "
                           "per million output tokens, stable")
    assert "images" not in line and "per 1000" not in line
    # the full line would run past 160 characters: the count of levels re-measured gives way
    assert line.endswith("stable (1 of 3 levels unstable, left out)") and len(line) <= 160
    assert answer.details == ["left out: concurrency 16 unstable"]  # in words, above the line


def test_the_slo_point_is_the_goodput_over_sound_levels_only() -> None:
    slos = parse_slos("ttft_p99=100ms")
    levels = [_level(1, 300.0, 10.0, ttft_p99=0.02), _level(4, 900.0, 30.0, ttft_p99=0.06),
              _level(8, 1200.0, 40.0, ttft_p99=0.08, remeasure="out of line with the level before"),
              _level(16, 1500.0, 50.0, ttft_p99=0.4)]
    good = goodput(levels, slos)
    assert good is not None and good.level.level == 4  # level 8 meets it but is not standing as sound
    answer = decide(levels, cost_per_hour=3.6, stream_slos=slos)
    assert answer.targeted and answer.deciding is levels[1] and answer.slo_bounded
    assert answer.line.startswith("answer: at ttft_p99 <= 100 ms, CPU: 900.0 tokens/s at concurrency 4, $1.11 per "
                                  "million output tokens")
    none = decide(levels[3:], stream_slos=slos)
    assert none.line == "answer: not decided: no sound level meets ttft_p99 <= 100 ms"


def test_the_fold_reads_the_objectives_from_the_recorded_profile() -> None:
    fold = AnswerFold()
    fold.apply(ev.SessionStarted(session_id="s", profile_name="p", mode="sweep",
                                 profile={"load": {"slo": "ttft_p99=100ms"}, "hardware": {"cost_per_hour": 3.6}}))
    for r in (_level(1, 300.0, 10.0, ttft_p99=0.02), _level(4, 900.0, 30.0, ttft_p99=0.3)):
        fold.apply(r)
    answer = fold.answer()
    assert answer.deciding is not None and answer.deciding.level == 1
    assert "at ttft_p99 <= 100 ms" in answer.line and "per million output tokens" in answer.line


def test_a_unary_sweep_keeps_its_images() -> None:
    unary = _level(4, 0.0, 50.0)
    unary.stream = None
    answer = decide([unary], cost_per_hour=3.6)
    assert "images/s" in answer.line and "per 1000" in answer.line and answer.tokens_per_s is None


def _side(label: str, price: float, tokens_per_s: float) -> Side:
    return Side(label, price, "", Figure(tokens_per_s, cost_per_million_tokens(price, tokens_per_s), tokens=True))


def test_scale_out_or_up_in_dollars_per_million_tokens() -> None:
    answer = scale_answer(_side("2 boxes of cpu", 4.0, 1400.0), _side("1 box of cpu2", 2.0, 1500.0))
    assert answer.choice == SCALE_UP
    assert answer.line == ("at the peak: 2 boxes of cpu: 1,400 tokens/s at $0.794 per million tokens; 1 box of cpu2: "
                           "1,500 tokens/s at $0.370 per million tokens → scale up")
    assert scale_answer(_side("out", 2.0, 3000.0), _side("up", 4.0, 3000.0)).choice == SCALE_OUT
    mixed = scale_answer(_side("out", 2.0, 3000.0), Side("up", 4.0, "", Figure(100.0, 0.01)))
    assert mixed.choice is None and "one side streams tokens" in mixed.line


def test_token_counts_are_read_from_an_integer_output() -> None:
    assert raw_token_count((3).to_bytes(4, "little"), "INT32") == 3
    assert raw_token_count((5).to_bytes(8, "little") + (2).to_bytes(8, "little"), "UINT64") == 7
    assert raw_token_count(b"\x01\x02\x03", "INT32") is None  # not whole elements
    assert raw_token_count((-1).to_bytes(4, "little", signed=True), "INT32") == -1  # refused by token_count_problem
    assert raw_token_count(b"\x00\x00\x00\x00", "FP32") is None
    assert raw_token_count(b"", "INT32") is None
    assert json_token_count(4) == 4 and json_token_count([1, 2]) == 3
    assert json_token_count("4") is None and json_token_count(True) is None and json_token_count(None) is None
    times = StreamTimes()
    for at, tokens in ((10, 2), (15, 3), (25, 1)):
        times.add(at, tokens)
    assert (times.responses, times.tokens, times.gaps_ns, times.first_ns) == (3, 6, [5, 10], 10)


@pytest.mark.parametrize(("text", "parsed"), [
    ("128", LengthSpec("fixed", 128)), (128, LengthSpec("fixed", 128)), ("128+-32", LengthSpec("uniform", 96, 160)),
    (" 64 ± 8 ", LengthSpec("uniform", 56, 72)), ("0", None), ("8+-8", None), ("x", None), (True, None), ("1.5", None),
    ("", None)])
def test_a_length_is_a_mean_and_a_spread_below_it(text: object, parsed: LengthSpec | None) -> None:
    assert token_count(text) == parsed


def test_lengths_fall_within_the_spread_and_repeat_with_the_seed() -> None:
    drawn = lengths("100+-20", "input_tokens", 500, random.Random(1))
    assert min(drawn) >= 80 and max(drawn) <= 120 and len(set(drawn)) > 20
    assert drawn == lengths("100+-20", "input_tokens", 500, random.Random(1))
    assert lengths("7", "output_tokens", 3, random.Random(1)) == [7, 7, 7]


def test_joules_per_token_from_the_gpus_mean_power() -> None:
    from engine.analysis.energy import joules_per_token

    assert joules_per_token({"gpu-a": 300.0, "gpu-b": 100.0}, 2000.0) == pytest.approx(0.2)
    assert joules_per_token({}, 2000.0) is None  # no power samples (a CPU run): not measured
    assert joules_per_token({"gpu-a": 300.0}, 0.0) is None


def test_the_report_gives_tokens_cost_and_energy_at_the_peak_and_the_slo_point() -> None:
    from types import SimpleNamespace
    from typing import cast

    from engine.record.findings import RunFindings
    from engine.record.recording_report import token_figures

    levels = [_level(1, 300.0, 10.0, ttft_p99=0.02), _level(4, 900.0, 30.0, ttft_p99=0.3)]
    answer = decide(levels, cost_per_hour=3.6, stream_slos=parse_slos("ttft_p99=100ms"))
    # the model's config uses GPU 0 (gpu-a); gpu-b's power is another tenant's, never counted
    spans = [SimpleNamespace(result=levels[0], gpu={"power": {"gpu-a": 150.0, "gpu-b": 400.0}}),
             SimpleNamespace(result=levels[1], gpu={"power": {}})]
    summary = SimpleNamespace(config_variant="1x", server={}, model_config={"instance_group": [
        {"kind": "KIND_GPU", "gpus": [0]}]}, gpus=[SimpleNamespace(uuid="gpu-a", index=0),
                                                  SimpleNamespace(uuid="gpu-b", index=1)])
    text = token_figures(cast(RunFindings, SimpleNamespace(answer=answer, levels=spans, summary=summary)))
    assert text == ("Output tokens: at the peak (4): 900.0 tokens/s, $1.11 per million output tokens, J per output "
                    "token not measured (no power samples of the GPUs the model uses); at ttft_p99 <= 100 ms (1): "
                    "300.0 tokens/s, $3.33 per million output tokens, 0.5 J per output token.")
    unary = _level(4, 0.0, 50.0)
    unary.stream = None
    assert token_figures(cast(RunFindings, SimpleNamespace(answer=decide([unary]), levels=[], summary=summary))) is None
    on_cpu = SimpleNamespace(config_variant="cpu", server={}, model_config={"instance_group": [{"kind": "KIND_CPU"}]},
                             gpus=summary.gpus)  # a CPU model on a GPU box: the GPUs' idle power is not its energy
    text = token_figures(cast(RunFindings, SimpleNamespace(answer=answer, levels=spans, summary=on_cpu)))
    assert text is not None and "0.5 J" not in text and text.count("J per output token not measured") == 2


def test_a_tensor_parallel_config_spends_every_gpus_energy() -> None:
    """KIND_MODEL (vLLM, TensorRT-LLM: the backend spreads one model over the GPUs) counts every
    GPU's energy, as KIND_GPU without a list does; a list names its GPUs."""
    from engine.analysis.energy import config_gpus

    assert config_gpus({"instance_group": [{"kind": "KIND_MODEL", "count": 1}]}) is None
    assert config_gpus({"instance_group": [{"kind": "KIND_GPU", "gpus": [0, 1]}]}) == {0, 1}
    assert config_gpus({"instance_group": [{"kind": "KIND_CPU", "count": 2}]}) == set()


def test_the_charts_plot_each_standing_level_s_tokens() -> None:
    from engine.record.recording_report import stream_points

    first = _level(4, 500.0, 20.0, status="unstable")
    again = _level(4, 900.0, 30.0)  # a later trial of the same level stands
    failed = _level(8, 0.0, 0.0, status="failed")
    unary = _level(16, 0.0, 50.0)
    unary.stream = None
    assert stream_points([_level(1, 300.0, 10.0), first, again, failed, unary]) == [(1.0, 300.0), (4.0, 900.0)]


def test_the_answer_names_the_traffic_its_cache_figure_holds_for() -> None:
    from engine.analysis.answer import traffic_words

    cached = msgspec.structs.replace(_level(4, tokens_per_s=900.0, rps=50.0),
                                     cache=ev.ServerCache(server="vLLM", hit_rate=0.6, state="warm from earlier levels"))
    profile = {"load": {"prefix_groups": 4, "prefix_tokens": 1024, "turns": 3}}
    assert traffic_words(profile) == "4 groups x 1,024-word prefix, 3-turn sessions"
    assert traffic_words({"load": {"prefix_groups": 4, "prefix_tokens": 1024, "input_data": "p.json"}}) == ""
    assert traffic_words({"load": {"prefix_groups": 0, "prefix_tokens": 0}}) == "" and traffic_words({}) == ""
    fold = AnswerFold()
    fold.apply(ev.SessionStarted(session_id="s", profile_name="p", profile=profile, mode="sweep"))
    fold.apply(cached)
    fold.apply(ev.SweepFinished(levels=1, stable=1, failed=0))
    line = fold.answer().line
    assert "60% prefix cache hits (4 groups x 1,024-word prefix, 3-turn sessions):" in line, line
    # no cache figure, no shape: the traffic is named beside the figure it explains
    assert "groups" not in decide([_level(4, tokens_per_s=900.0, rps=50.0)], traffic="4 groups x 8-word prefix").line
