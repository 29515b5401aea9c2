"""A streaming model's inputs and token counts against the real embedded Triton serving toy_llm:
synthetic prompts of given input and output lengths reach the model (its MAX_TOKENS input), over
both streaming transports; load.tokens_from counts each response's tokens from an output; a
tokens_from the model cannot give is refused before any load. toy_llm is the session's
(tests/engine/load/conftest.py); the recorded CLI run loads it as a remote server. Its answers
checked against validation data: tests/engine/load/test_stream_answers.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.profiles import load_profile
from engine.triton.target import Target
from tests.engine.load.conftest import quick_load, sweep

pytestmark = [pytest.mark.server, pytest.mark.slow]
STREAMING = ("grpc_stream", "generate_stream")
ROOT = Path(__file__).resolve().parents[3]


def _load(**overrides):
    settings = dict(transport="grpc_stream", min_window_requests=10, stability_percent=100.0)
    settings.update(overrides)
    return quick_load(**settings)


@pytest.mark.parametrize("transport", STREAMING)
def test_synthetic_prompts_ask_the_model_for_their_output_length(toy_llm, transport: str) -> None:
    target, info = toy_llm
    results, events = asyncio.run(sweep(target, info, _load(transport=transport, input_tokens="24+-8",
                                                            output_tokens="6", warmup_s=0, stable_windows=2,
                                                            max_windows=2)))  # counts, not rates
    (result,) = results
    assert result.errors == 0, result.error_messages
    assert result.stream is not None
    # toy_llm answers MAX_TOKENS responses (its default is 16): the output length reached it
    assert result.stream.responses_per_request == 6
    assert result.stream.tokens_per_request == 6
    (used,) = events.of("input_data")
    assert used.source == "synthetic" and used.entries == 64  # a spread: 64 prompts, made before the first level


def test_a_spread_of_output_lengths_is_sent(toy_llm) -> None:
    target, info = toy_llm
    results, _ = asyncio.run(sweep(target, info, _load(output_tokens="6+-4", concurrency=[4])))
    (result,) = results
    assert result.errors == 0 and result.stream is not None
    # lengths 2 to 10, uniformly: the mean lies strictly between the bounds, away from both
    assert 3 < result.stream.responses_per_request < 9


@pytest.mark.parametrize("transport", STREAMING)
def test_tokens_from_counts_each_response_from_an_output(toy_llm, transport: str) -> None:
    """toy_llm's INDEX output holds 0, 1, 2, 3 over a request's 4 responses: read as token
    counts, a request carries 0 + 1 + 2 + 3 = 6 tokens for its 4 responses."""
    target, info = toy_llm
    results, _ = asyncio.run(sweep(target, info, _load(transport=transport, input_tokens="8", output_tokens="4",
                                                       tokens_from="INDEX")))
    (result,) = results
    assert result.errors == 0 and result.stream is not None
    assert result.stream.responses_per_request == 4
    assert result.stream.tokens_per_request == 6
    responses_per_s = result.stream.responses_per_request * result.throughput_rps
    assert result.stream.output_tokens_per_s == pytest.approx(responses_per_s * 6 / 4, rel=0.05)


@pytest.mark.parametrize(("name", "words"), [("NOPE", "expected one of the model's outputs (INDEX, TOKEN)"),
                                             ("TOKEN", "output TOKEN is BYTES")])
def test_a_tokens_from_the_model_cannot_give_is_refused_before_any_load(toy_llm, name: str, words: str) -> None:
    target, info = toy_llm
    with pytest.raises(UserError, match="load.tokens_from") as caught:  # raised before the workers start
        asyncio.run(sweep(target, info, _load(input_tokens="8", tokens_from=name)))
    assert words in str(caught.value)


def test_a_model_without_an_output_length_input_is_refused(identity_server, identity_info) -> None:
    target = Target(identity_server.http_url, "identity")
    with pytest.raises(UserError, match="load.input_tokens: synthetic prompts need a model with one BYTES"):
        asyncio.run(sweep(target, identity_info, quick_load(input_tokens="8")))


def _cli(*args: str, cwd: Path, drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    base = [a for a in ("--headless", "--no-check", "--no-record") if a not in drop]
    return subprocess.run([sys.executable, "-m", "tui.cli", *base,
                           "--set", "model.name=toy_llm", "--set", "load.transport=grpc_stream", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize(("setting", "words"), [
    ("load.input_tokens=12+-40", "load.input_tokens: expected a length from 1"),
    ("load.output_tokens=lots", "load.output_tokens: expected a length from 1"),
    ("load.output_tokens=0", "load.output_tokens: expected a length from 1"),
])
def test_a_bad_length_is_refused_in_one_line(setting: str, words: str) -> None:
    """The profile the CLI's flags make (the CLI's own case below) refuses the length, in one line."""
    with pytest.raises(UserError) as refused:
        load_profile(overrides=["model.name=toy_llm", "load.transport=grpc_stream", setting])
    assert words in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


def test_the_cli_refuses_a_bad_length_in_one_line_with_exit_2(tmp_path) -> None:
    proc = _cli("--set", "load.output_tokens=lots", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "load.output_tokens: expected a length from 1" in lines[0], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_recorded_streaming_run_exports_its_tokens_everywhere(toy_llm, tmp_path) -> None:
    """Synthetic prompts through the CLI, recorded and priced: the answer line counts tokens and
    prices them per million; CSV, JSON, Markdown and HTML carry TTFT, ITL and tokens/s, and no
    report prices a stream per 1000 images."""
    import csv

    from engine.record.exporters import export
    from engine.record.reader import Recording

    target, _info = toy_llm
    proc = _cli("--record", "--output", str(tmp_path), "--set", "server.kind=remote", "--set",
                f"server.url={target.http_url}", "--set", "load.concurrency=[2]", "--set", "load.window_ms=300",
                "--set", "load.warmup_s=0.3", "--set", "load.max_trials=1", "--set", "load.contended_percent=100",
                "--set", "load.stability_percent=100", "--set", "load.input_tokens=12+-4", "--set",
                "load.output_tokens=5", "--set", "hardware.cost_per_hour=2.5", cwd=tmp_path, drop=("--no-record",))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    answer = proc.stdout.strip().splitlines()[-1]
    assert answer.startswith("answer: peak, CPU: ") and " tokens/s at concurrency 2 " in answer
    assert "per million output tokens" in answer and "images" not in answer
    assert "$/1k img" not in proc.stdout and "per 1000 images" not in proc.stdout
    (path,) = [p for p in tmp_path.rglob("*.sqlite")]
    with Recording.open(path) as recording:
        (result,) = list(recording.events(("level_result",)))
        assert result.stream is not None and result.stream.tokens_per_request == 5
        rows = list(csv.reader(export(recording, "csv", tmp_path / "out").read_text().splitlines()))
        data = export(recording, "json", tmp_path / "out").read_text()
        md = export(recording, "md", tmp_path / "out").read_text()
        html = export(recording, "html", tmp_path / "out").read_text()
    head, row = rows[0], rows[1]
    cell = dict(zip(head, row, strict=True))
    assert float(cell["Output Token Throughput (per sec)"]) == pytest.approx(result.stream.output_tokens_per_s, abs=0.01)
    assert int(cell["Time To First Token p99"]) == round(result.stream.ttft.p99 * 1e6)
    assert float(cell["Output Tokens/Request"]) == 5
    assert '"ttft"' in data and '"output_tokens_per_s"' in data
    for report in (md, html):
        assert "TTFT p99 ms" in report and "tok/s" in report and "$/Mtok" in report
        assert "$/1k img" not in report
    assert answer in md  # the report says the same answer
    assert "Output tokens: at the peak (2): " in md and "J per output token not measured (no power samples of the GPUs the model uses)" in md
