"""Streaming (decoupled) models against the real embedded Triton serving toy_llm: a decoupled model
is refused on a unary transport before any load; grpc_stream drives it in concurrency and rate
modes with every response checked, figures per request (TTFT, ITL, responses) in the level's
result; prompts that are not text are counted as errors; a stream cut by the server's death is an
error, never a shorter success."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.load.sweep import run_sweep
from engine.record.exporters import export
from engine.record.reader import Recording
from engine.transport_table import is_decoupled
from engine.triton.api import TritonApi
from engine.triton.target import Target, TargetInfo, describe_target
from tests.engine.load.conftest import (
    Events,
    first_measured_window,
    kill_tritonserver,
    quick_load,
    sweep,
)
from tests.structs import replace

pytestmark = [pytest.mark.server, pytest.mark.slow]
PROMPTS = Path(__file__).resolve().parents[2] / "data" / "toy_llm_prompts.json"
TOKENS = 8  # MAX_TOKENS of every prompt in PROMPTS


def _start(tmp_path_factory, name: str):
    from engine.server.embedded import EmbeddedServer

    return EmbeddedServer(model="toy_llm", variant="cpu", log_dir=tmp_path_factory.mktemp(name))


STREAMING = ("grpc_stream", "generate_stream")


def _stream_load(**overrides):
    settings = dict(transport="grpc_stream", input_data=str(PROMPTS), min_window_requests=10)
    settings.update(overrides)
    return quick_load(**settings)


def test_the_server_config_says_toy_llm_is_decoupled(toy_llm) -> None:
    _, info = toy_llm
    assert is_decoupled(info.model_config)


@pytest.mark.parametrize("transport", ["http", "grpc", "system_shm"])
def test_a_decoupled_model_on_a_unary_transport_is_refused_before_any_load(toy_llm, transport: str) -> None:
    target, info = toy_llm
    with pytest.raises(UserError) as caught:
        asyncio.run(sweep(target, info, _stream_load(transport=transport)))
    line = str(caught.value)
    assert "decoupled" in line and "grpc_stream, generate_stream" in line and "\n" not in line


def _checked(result, tokens: int = TOKENS) -> None:
    assert result.status in ("stable", "unstable")
    assert result.errors == 0 and result.requests > 0
    stream = result.stream
    assert stream is not None
    # every request answered with all its responses, none shorter
    assert stream.responses_per_request == tokens
    assert stream.ttft.count == result.requests
    assert 0 < stream.ttft.p50 <= result.latency.p50
    gaps = result.requests * (tokens - 1)
    if stream.itl_note is None:  # every gap measured, or left out as one of responses read together (counted)
        assert stream.itl.count + stream.itl_unmeasured == gaps
        assert stream.itl.p99 is not None and stream.itl.p99 <= result.latency.max
    else:  # a busy box starved the client, which read most responses in reads of several: not measured
        assert "ITL not measurable" in stream.itl_note and stream.itl.count == 0 and stream.itl.p99 is None
        assert 2 * stream.itl_unmeasured > gaps
    assert stream.output_tokens_per_s == pytest.approx(result.throughput_rps * tokens)
    assert stream.tokens_per_s_per_request and stream.tokens_per_s_per_request > 0


@pytest.mark.parametrize("transport", STREAMING)
def test_concurrency_mode(toy_llm, transport: str) -> None:
    target, info = toy_llm
    results, events = asyncio.run(sweep(target, info, _stream_load(concurrency=[1, 4], transport=transport)))
    assert len(results) == 2
    for result in results:
        _checked(result)
    windows = [w for w in events.of("window") if w.requests]
    assert windows and all(w.stream is not None and w.stream.responses_per_request == TOKENS for w in windows)


@pytest.mark.parametrize("transport", STREAMING)
def test_rate_mode(toy_llm, transport: str) -> None:
    target, info = toy_llm
    results, _ = asyncio.run(sweep(target, info, _stream_load(mode="rate", rates=[20.0], stability_percent=50,
                                                              transport=transport)))
    (result,) = results
    _checked(result)
    assert result.target_rate == 20.0


def test_without_input_data_a_text_model_gets_text_prompts(toy_llm) -> None:
    """The prompts are made before any transport sends them (generate_stream sends made prompts
    too: the stalled-client test below); one level, every request checked."""
    target, info = toy_llm
    results, events = asyncio.run(sweep(target, info, _stream_load(input_data="", concurrency=[2])))
    (result,) = results
    _checked(result, tokens=16)  # the model's own output length
    (used,) = events.of("input_data")
    assert used.source == "synthetic" and "text prompts" in used.path


@pytest.mark.parametrize("transport", STREAMING)
def test_prompts_that_are_not_text_are_counted_errors(toy_llm, tmp_path, transport: str) -> None:
    target, info = toy_llm
    path = tmp_path / "numbers.json"
    path.write_text('{"data": [{"PROMPT": ["1234 5678"], "MAX_TOKENS": [4]}]}')
    results, _ = asyncio.run(sweep(target, info, _stream_load(input_data=str(path), concurrency=[2],
                                                              transport=transport)))
    (result,) = results
    assert result.status == "failed" and result.requests == 0
    assert result.errors_by_kind.get("rejected", 0) > 0
    assert any("not text" in m for m in result.error_messages), result.error_messages


@pytest.mark.parametrize("transport", STREAMING)
def test_a_stream_cut_by_the_server_dying_is_an_error_never_a_shorter_success(tmp_path_factory, transport: str) -> None:
    async def cut(srv, target: Target, info: TargetInfo):
        events, stop = Events(), asyncio.Event()
        # long streams: every request is mid-stream when the server dies
        load = _stream_load(concurrency=[4], max_windows=40, stability_percent=0.001, request_timeout_s=5.0,
                            server_wait_s=1.0, transport=transport)
        task = asyncio.create_task(run_sweep(TritonApi(target, info), load, events.append, stop))
        await first_measured_window(events, timeout_s=120)
        kill_tritonserver(srv)
        return await asyncio.wait_for(task, 120), events

    with _start(tmp_path_factory, "triton-toy-llm-cut") as srv:
        target = Target(srv.http_url, "toy_llm")
        info = asyncio.run(describe_target(target))
        results, _ = asyncio.run(cut(srv, target, info))
    (result,) = results
    assert result.status == "failed"
    # the streams in flight when it died: each a lost connection, counted once
    assert result.errors_by_kind.get("connection_reset", 0) > 0, result.errors_by_kind
    assert any("connection lost" in m for m in result.error_messages), result.error_messages
    if result.stream is not None:  # what was answered before the cut was answered whole
        assert result.stream.responses_per_request == TOKENS


def test_a_grpc_stream_sent_to_the_http_port_is_refused_before_any_load(toy_llm) -> None:
    target, info = toy_llm
    port = int(target.http_url.rsplit(":", 1)[1])
    wrong = replace(target, grpc_url=f"127.0.0.1:{port}")  # Triton's HTTP/1.1 port
    with pytest.raises(UserError, match="is not a gRPC server"):
        asyncio.run(sweep(wrong, info, _stream_load(concurrency=[1], max_windows=2)))

ROOT = Path(__file__).resolve().parents[3]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", "--headless", "--no-check", "--set", "model.name=toy_llm",
                           "--set", "load.window_ms=300", "--set", "load.warmup_s=0.3",
                           "--set", "load.max_trials=1", "--set", "load.contended_percent=100",  # the box-noise rule off (tests/conftest.py)
                           *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_the_cli_refuses_a_decoupled_model_on_http_with_exit_2(toy_llm, tmp_path) -> None:
    target, _ = toy_llm
    proc = _cli("--no-record", "--url", target.http_url, "--set", "load.concurrency=[1]", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "decoupled" in last and "grpc_stream" in last
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "window" not in proc.stdout  # no load was sent


def test_a_recorded_streaming_run_keeps_its_figures_and_prints_them(toy_llm, tmp_path) -> None:
    target, _ = toy_llm
    proc = _cli("--record", "--output", str(tmp_path), "--url", target.http_url, "--set", "load.transport=grpc_stream",
                "--set", "load.concurrency=[2]", "--input-data", str(PROMPTS), "--set", "hardware.cost_per_hour=2.5",
                "--slo", "ttft_p99=60s,itl_p99=60s", "--set", "load.stability_percent=100", "--set", "load.max_windows=30",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for header in ("TTFT p99 ms", "ITL p99 ms", "tok/s", "$/Mtok"):
        assert header in proc.stdout
    (path,) = [p for p in tmp_path.rglob("*") if p.suffix == ".sqlite"]
    with Recording.open(path) as recording:
        (result,) = list(recording.events(("level_result",)))
        report = export(recording, "md", tmp_path / "reports").read_text()
    # bounds no level misses, and stability a busy box reaches (an unstable level decides no goodput):
    # the line says where the goodput was served and its price. A client the box starved reads the
    # tokens in bursts: then the ITL is not measured (its note), and the answer says so, not a goodput
    assert "goodput (ttft_p99 ≤ 60,000 ms, itl_p99 ≤ 60,000 ms): " in proc.stdout, proc.stdout[-3000:]
    assert result.stream is not None
    if result.stream.itl_note is None:
        assert "at level 2, $" in proc.stdout and "per million output tokens at $2.5/h" in proc.stdout
    else:
        assert f"not decided at level 2: {result.stream.itl_note}" in proc.stdout, proc.stdout[-3000:]
        assert "answer: not decided: ttft_p99 <= 60000 ms, itl_p99 <= 60000 ms not decided at 1 level" in proc.stdout
    assert result.stream is not None and result.stream.responses_per_request == TOKENS
    assert result.stream.ttft.count == result.requests
    for header in ("TTFT p99 ms", "ITL p99 ms", "tok/s", "$/Mtok"):  # the report's table has them too
        assert header in report


def test_prompts_from_a_jsonl_file_stream(toy_llm, tmp_path) -> None:
    target, info = toy_llm
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"text": "Why is the sky blue?", "MAX_TOKENS": [5]}\n"Say something kind."\n')
    results, events = asyncio.run(sweep(target, info, _stream_load(input_data=str(path), concurrency=[2])))
    (result,) = results
    assert result.errors == 0 and result.stream is not None
    # one prompt asks 5 tokens, the other the model's 16: every request whole, in turn
    assert 5 < result.stream.responses_per_request < 16
    (used,) = events.of("input_data")
    assert used.source == "jsonl" and used.entries == 2


def test_the_cli_refuses_a_bad_prompt_file_with_exit_2(tmp_path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text('"fine"\n{"text": 12}\n')
    proc = _cli("--no-record", "--set", "load.transport=grpc_stream", "--input-data", str(path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "line 2 has no prompt" in last and "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("transport", STREAMING)
def test_responses_that_are_not_the_answer_asked_for_are_counted(toy_llm, transport: str) -> None:
    """Every response is checked: told TOKEN is INT32, each response (BYTES) is malformed, the
    level fails, and no request counts as answered."""
    target, info = toy_llm
    wrong = replace(info, outputs=[{**o, "datatype": "INT32"} if o["name"] == "TOKEN" else o
                                               for o in info.outputs])
    results, _ = asyncio.run(sweep(target, wrong, _stream_load(concurrency=[2], transport=transport)))
    (result,) = results
    assert result.status == "failed" and result.requests == 0
    assert result.errors_by_kind.get("malformed_answer", 0) > 0
    assert any("output TOKEN" in m and "INT32" in m for m in result.error_messages), result.error_messages


@pytest.mark.parametrize("transport", STREAMING)
def test_a_unary_model_streams_one_response_per_request(identity_server, identity_info, transport: str) -> None:
    """A unary model over a streaming transport: one response each, the final one. Over a gRPC
    stream a fast answer can come before its request's write has returned; a next write that did
    not wait for it was lost now and then (a timeout: this test does not catch it every run)."""
    target = Target(identity_server.http_url, "identity")
    results, _ = asyncio.run(sweep(target, identity_info, quick_load(transport=transport, request_timeout_s=3.0,
                                                                     stability_percent=50)))
    (result,) = results
    assert result.errors == 0, result.errors_by_kind
    assert result.stream is not None and result.stream.responses_per_request == 1
    assert result.stream.itl.count == 0



@pytest.mark.parametrize("transport", STREAMING)
def test_responses_a_stalled_client_reads_together_are_counted_not_timed(toy_llm, transport: str) -> None:
    target, info = toy_llm
    # the worker's loop busy 18 ms at a time: the responses that come meanwhile are read together
    tokens = 48
    results, events = asyncio.run(sweep(target, info, _stream_load(
        input_data="", output_tokens=tokens, concurrency=[1], transport=transport, dev_stall_ms=18,
        stability_percent=100, min_window_requests=3)))
    (result,) = results
    stream = result.stream
    assert result.errors == 0 and stream is not None and stream.responses_per_request == tokens
    assert stream.itl_unmeasured > 0
    if stream.itl_note is None:  # the gaps between reads: none of them 0
        assert stream.itl.count + stream.itl_unmeasured == result.requests * (tokens - 1)
        assert stream.itl.min is not None and stream.itl.min > 0
    else:  # most gaps were in reads of several: ITL not measured, and the sweep says why
        assert stream.itl.count == 0 and stream.itl.p50 is None
        assert any(stream.itl_note in w.message for w in events.of("warning"))
