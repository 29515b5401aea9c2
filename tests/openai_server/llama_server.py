"""Helpers for a real OpenAI-compatible server on loopback: llama.cpp's own server
(`llama-server`), serving the tiny GGUF model that tiny_model.py writes at test time.
docs/results/openai_server_choice.md says why this server (and not llama-cpp-python's Python
server or vLLM's CPU build) and what it costs to build.

tests/conftest.py's `openai_server` fixture starts it once per test session (per xdist worker) on
a free loopback port, waits for `/v1/models` to list the model (the condition, within a generous
budget for a busy 2-core box, never a fixed sleep), and stops it by its own PID. Without a
llama-server binary (scripts/build_llama_server.sh builds one) or without the `gguf` package that
writes the model, the tests that use it are skipped, saying what to run.

Where the binary is looked for: $LLAMA_SERVER, then what scripts/build_llama_server.sh built
(~/.cache/gpuscale-tui/llama-server/*/bin/llama-server, or under $XDG_CACHE_HOME), then
`llama-server` on PATH."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.server.ports import free_port
from tests.openai_server import tiny_model

START_BUDGET_S = 120.0   # a start takes well under a second idle; a busy box can stretch it a lot
STOP_BUDGET_S = 15.0
BUILD_HINT = "scripts/build_llama_server.sh builds it (docs/results/openai_server_choice.md)"


@dataclass(frozen=True)
class OpenAIServer:
    base_url: str       # http://127.0.0.1:PORT/v1
    model: str          # the name /v1/models lists, to send as "model"
    pid: int
    log_path: Path


def find_llama_server() -> str | None:
    """The llama-server binary to run, or None."""
    named = os.environ.get("LLAMA_SERVER")
    if named:
        return named if os.access(named, os.X_OK) else None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    built = sorted((cache / "gpuscale-tui" / "llama-server").glob("*/bin/llama-server"))
    if built:
        return str(built[-1])
    return shutil.which("llama-server")


def _models(base_url: str, api_key: str | None = None) -> list[str] | None:
    """The model ids /v1/models lists, or None while the server does not answer yet."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{base_url}/models", headers=headers), timeout=5) as r:
            if r.status != 200:
                return None
            return [m["id"] for m in json.load(r).get("data", [])]
    except (OSError, ValueError, KeyError, TypeError, urllib.error.URLError):
        return None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's own PID, then SIGKILL to that PID if it does not exit in time."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_BUDGET_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_BUDGET_S)


def _log_tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


@contextlib.contextmanager
def run_llama_server(binary: str, model_path: Path, log_dir: Path, *, alias: str = tiny_model.MODEL_NAME,
                     parallel: int = 4, extra_args: tuple[str, ...] = (),
                     api_key: str | None = None) -> Iterator[OpenAIServer]:
    """Start llama-server on a free loopback port, wait until /v1/models lists the model, yield
    it, and stop it by its PID. `parallel` slots serve that many requests at once (the context
    is split between them). ``api_key``: the server asks for it (and the wait sends it)."""
    last_error = ""
    for _ in range(3):  # a free port can be taken between the probe and the server's bind
        port = free_port()
        base_url = f"http://127.0.0.1:{port}/v1"
        log_path = log_dir / f"llama-server-{port}.log"
        cmd = [binary, "--model", str(model_path), "--alias", alias, "--host", "127.0.0.1",
               "--port", str(port), "--ctx-size", str(tiny_model.N_CTX * parallel),
               "--parallel", str(parallel), "--threads", "1", "--threads-batch", "1", *extra_args,
               *(("--api-key", api_key) if api_key else ())]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + START_BUDGET_S
            while time.monotonic() < deadline and proc.poll() is None:
                if alias in (_models(base_url, api_key) or []):
                    yield OpenAIServer(base_url=base_url, model=alias, pid=proc.pid, log_path=log_path)
                    return
                time.sleep(0.05)
            exited = proc.poll() is not None
            last_error = (f"llama-server ({' '.join(cmd)}) "
                          + (f"exited with {proc.returncode}" if exited
                             else f"did not list {alias} on {base_url}/models within {START_BUDGET_S:.0f} s")
                          + f"; its log ends:\n{_log_tail(log_path)}")
            if not (exited and "bind" in _log_tail(log_path).lower()):
                break  # only a port taken under us is worth another try
        finally:
            _stop(proc)
    raise RuntimeError(last_error)
