"""A real llama-server that asks for a key, and a real server that is not OpenAI's: a wrong key, a
wrong model and a server that does not speak the API are each one line and exit 2 before any load;
with the right key the sweep runs and the key is on no surface (the recording's bytes, every export,
what the command printed)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.openai_server.llama_server import OpenAIServer, find_llama_server, run_llama_server

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-gpuscale-test-7f3a9c1e55"
QUICK = ["--no-check", "--set", "load.max_trials=1", "--set", "load.contended_percent=100", "--set", "load.window_ms=300",
         "--set", "load.warmup_s=0.3", "--set", "load.max_windows=3", "--set", "load.stability_percent=1000",
         "--set", "load.concurrency=1", "--set", "load.output_tokens=6", "--set", "load.api_key_env=GPUSCALE_TEST_KEY"]


@pytest.fixture(scope="module")
def keyed_server(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenAIServer]:
    binary = find_llama_server()
    if binary is None:
        pytest.skip("no llama-server binary (scripts/build_llama_server.sh builds it)")
    with run_llama_server(binary, tiny_gguf, tmp_path_factory.mktemp("keyed"), parallel=1, api_key=KEY) as srv:
        yield srv


def _cli(args: list[str], key: str | None, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GPUSCALE_TEST_KEY"}
    if key is not None:
        env["GPUSCALE_TEST_KEY"] = key
    return subprocess.run([sys.executable, "-m", "tui.cli", "--record", "-o", str(tmp_path), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)


def _one_line_exit_2(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and all(w in errors[0] for w in words), proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("key", [None, "sk-wrong"])
def test_a_missing_or_wrong_key_is_one_line(keyed_server, key: str | None, tmp_path: Path) -> None:
    proc = _cli(["--url", keyed_server.base_url, *QUICK], key, tmp_path)
    _one_line_exit_2(proc, "key")
    assert KEY not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_with_the_key_the_sweep_runs_and_the_key_is_on_no_surface(keyed_server, tmp_path: Path) -> None:
    proc = _cli(["--url", keyed_server.base_url, *QUICK], KEY, tmp_path)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    (recording,) = tmp_path.glob("*.sqlite")
    exported = subprocess.run([sys.executable, "-m", "tui.cli", "export", str(recording), "-f", "json", "-f", "csv",
                               "-f", "md", "-f", "html", "--out", str(tmp_path / "out")],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert exported.returncode == 0, exported.stderr
    surfaces = {"stdout": proc.stdout.encode(), "stderr": proc.stderr.encode(), "recording": recording.read_bytes(),
                **{p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}}
    assert len(surfaces) >= 7  # the four exports beside the recording and what was printed
    assert [name for name, data in surfaces.items() if KEY.encode() in data] == []


@pytest.mark.slow
def test_a_model_the_server_does_not_serve_is_one_line(openai_server, tmp_path: Path) -> None:
    proc = _cli(["--url", openai_server.base_url, *QUICK, "--set", "model.name=no-such-model"], None, tmp_path)
    _one_line_exit_2(proc, "no-such-model")


@pytest.mark.slow
def test_a_server_that_is_not_openai_compatible_is_one_line(identity_server, tmp_path: Path) -> None:
    # a real Triton server: its port answers HTTP, but not /v1/models as OpenAI's API does
    proc = _cli(["--url", f"{identity_server.http_url}/v1", *QUICK], None, tmp_path)
    _one_line_exit_2(proc)
