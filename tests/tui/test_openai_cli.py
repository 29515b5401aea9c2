"""`gpuscale-tui --url http://HOST:PORT/v1` against an OpenAI-compatible server (the fake of
tests/engine/openai/fake_openai.py, asking for a key): the recording's levels hold the server's
token counts and $/Mtok is computed from them; the key is on no surface (the recording, the
headless log); a refused key, a wrong model and a server that is not OpenAI's are one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import format as fmt
from engine.analysis.scaling import cost_per_million_tokens
from engine.events import LevelResult
from engine.record.reader import Recording
from tests.engine.openai.fake_openai import TEMPLATE_TOKENS, FakeOpenAiThread

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-never-shown-4f9c2e"
QUICK = ["--set", "load.max_trials=1", "--set", "load.contended_percent=100",  # the box-noise rule off (tests/conftest.py)
         "--set", "load.window_ms=300", "--set", "load.warmup_s=0.3", "--set", "load.max_windows=4", "--no-check"]


def _run(*args: str, key: str | None = KEY, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    if key is not None:
        env["OPENAI_API_KEY"] = key
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def _one_line_exit_2(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.slow
def test_a_v1_url_records_tokens_from_usage_priced_and_never_the_key(tmp_path: Path) -> None:
    with FakeOpenAiThread(key=KEY) as url:
        proc = _run("--record", "-o", str(tmp_path), "--url", url, *QUICK, "--set", "load.concurrency=1,2",
                    "--set", "load.output_tokens=8", "--set", "hardware.cost_per_hour=2")
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "load.transport = http: chat_stream" in proc.stdout  # the /v1 rule picked the OpenAI API
    assert "server split" in proc.stdout and "queue ms" not in proc.stdout  # no statistics: the split not measured
    (path,) = tmp_path.glob("*.sqlite")
    with Recording.open(path) as rec:
        levels = [e for e in rec.events(("level_result",)) if isinstance(e, LevelResult)]
        assert rec.summary().cost_per_hour == 2
    assert [r.level for r in levels] == [1.0, 2.0]
    for r in levels:
        s = r.stream
        assert s is not None and r.errors == 0
        assert s.tokens_per_request == 8 and s.input_tokens_per_request == 8 + TEMPLATE_TOKENS  # the server's usage
        assert not s.tokens_are_words
        per_mtok = cost_per_million_tokens(2.0, s.output_tokens_per_s)
        assert per_mtok is not None and fmt.money(per_mtok) in proc.stdout  # each level's $/Mtok, from usage's tokens
    exported = _run("export", str(path), "-f", "json", "-f", "csv", "-f", "md", "-f", "html", "--out",
                    str(tmp_path / "export"))
    assert exported.returncode == 0, exported.stderr
    (md,) = (tmp_path / "export").glob("*.md")
    assert "| Model config | tiny-llm," in md.read_text()  # the server's model, not the profile's default
    (csv,) = (tmp_path / "export").glob("*.csv")
    head, *rows = csv.read_text().splitlines()
    columns = head.split(",")
    assert {"Input Tokens/Request", "Token Unit"} <= set(columns)
    assert all(r.split(",")[columns.index("Input Tokens/Request")] == f"{8 + TEMPLATE_TOKENS:.2f}" for r in rows)
    assert all(r.split(",")[columns.index("Token Unit")] == "tokens" for r in rows)
    # the key is on no surface: the recording, its exports, the headless log
    for surface in (*(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()), proc.stdout.encode(),
                    proc.stderr.encode(), exported.stdout.encode()):
        assert KEY.encode() not in surface


def test_a_refused_key_is_one_line_exit_2(tmp_path: Path) -> None:
    with FakeOpenAiThread(key="the-right-one") as url:
        line = _one_line_exit_2(_run("--record", "-o", str(tmp_path), "--url", url, *QUICK))
    assert "the server refused the API key (HTTP 401" in line and KEY not in line


def test_a_wrong_model_names_those_served_exit_2(tmp_path: Path) -> None:
    with FakeOpenAiThread(models=("tiny-llm", "other-llm")) as url:
        line = _one_line_exit_2(_run("--record", "-o", str(tmp_path), "--url", url, *QUICK,
                                     "--set", "model.name=gpt-9"))
    assert line.endswith("model.name: the server does not serve 'gpt-9'; it serves tiny-llm, other-llm")


def test_a_server_that_is_not_openai_is_one_line_exit_2(tmp_path: Path) -> None:
    with FakeOpenAiThread(mode="not_openai") as url:
        line = _one_line_exit_2(_run("--record", "-o", str(tmp_path), "--url", url, *QUICK))
    assert "not an OpenAI-compatible server (HTTP 404" in line
