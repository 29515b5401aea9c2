"""The streaming transports' answer checks and input refusals against the real embedded Triton
serving toy_llm (the session's, tests/engine/load/conftest.py): validation data is compared with
each request's last response (as perf_analyzer reads it), a right value passes and a wrong one is
counted as a wrong answer on both transports; bad prompt files are refused in one line with exit 2
whichever streaming transport reads them (the words by the check the CLI calls, for each file and
transport; the exit code and the one line by the CLI, once)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.profiles import load_profile
from tests.engine.load.conftest import quick_load, sweep
from tui.commands.flags import check_input_data

pytestmark = [pytest.mark.server, pytest.mark.slow]
STREAMING = ("grpc_stream", "generate_stream")
TOKENS = 6
PROMPTS = ("Tell me a story about a lighthouse.", "What is the capital of France?")
ROOT = Path(__file__).resolve().parents[3]


def _prompts(path: Path, last_index: int) -> str:
    """The prompts with MAX_TOKENS = TOKENS and, as validation data, the INDEX their last response
    must carry."""
    path.write_text(json.dumps({"data": [{"PROMPT": [p], "MAX_TOKENS": [TOKENS]} for p in PROMPTS],
                                "validation_data": [{"INDEX": [last_index]} for _ in PROMPTS]}))
    return str(path)


@pytest.mark.parametrize("transport", STREAMING)
def test_validation_data_is_the_last_responses(toy_llm, tmp_path, transport: str) -> None:
    """INDEX = TOKENS - 1 is what each request's last response carries (its earlier ones carry
    0..TOKENS - 2): every request passes, whole."""
    target, info = toy_llm
    load = quick_load(transport=transport, concurrency=[3], input_data=_prompts(tmp_path / "p.json", TOKENS - 1),
                      min_window_requests=10, stability_percent=50, warmup_s=0, stable_windows=2, max_windows=2)
    results, _ = asyncio.run(sweep(target, info, load))
    (result,) = results
    assert result.errors == 0, (result.errors_by_kind, result.error_messages)
    assert result.requests > 0 and result.stream is not None and result.stream.responses_per_request == TOKENS


@pytest.mark.parametrize("transport", STREAMING)
def test_a_wrong_last_response_is_a_wrong_answer(toy_llm, tmp_path, transport: str) -> None:
    target, info = toy_llm
    load = quick_load(transport=transport, concurrency=[2], input_data=_prompts(tmp_path / "p.json", TOKENS),
                      min_window_requests=10)
    results, _ = asyncio.run(sweep(target, info, load))
    (result,) = results
    assert result.status == "failed" and result.requests == 0  # counted, never a success
    assert result.errors_by_kind.get("wrong_answer", 0) == result.errors > 0, result.errors_by_kind
    assert any("INDEX" in m and f"expected {TOKENS}" in m and f"got {TOKENS - 1}" in m for m in result.error_messages), \
        result.error_messages


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", "--headless", "--no-check", "--no-record",
                           "--set", "model.name=toy_llm", "--set", "load.window_ms=300", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


BAD_FILES = {
    "prompts.jsonl": ('"fine"\n{"text": 12}\n', "line 2"),
    "broken.json": ('{"data": [{"PROMPT": ["fine"]}', "broken.json"),
    "empty.jsonl": ("", "empty.jsonl"),
}


@pytest.mark.parametrize("transport", STREAMING)
@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_a_bad_prompt_file_is_refused_in_one_line(tmp_path, transport: str, name: str) -> None:
    """What the CLI checks before the server starts (tui/commands/run.py), on the profile its
    flags make: the file is refused in one line that names what is wrong."""
    text, said = BAD_FILES[name]
    path = tmp_path / name
    path.write_text(text)
    profile = load_profile(overrides=["model.name=toy_llm", "load.window_ms=300", f"load.transport={transport}",
                                      f"load.input_data={json.dumps(str(path))}"])
    with pytest.raises(UserError) as refused:
        check_input_data(profile.load)
    assert said in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


def test_the_cli_refuses_a_bad_prompt_file_in_one_line_with_exit_2(tmp_path) -> None:
    """One bad file through the CLI (the check above names every file on each transport)."""
    text, said = BAD_FILES["prompts.jsonl"]
    path = tmp_path / "prompts.jsonl"
    path.write_text(text)
    proc = _cli("--set", "load.transport=generate_stream", "--input-data", str(path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert said in last, last
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "window" not in proc.stdout  # refused before any load
