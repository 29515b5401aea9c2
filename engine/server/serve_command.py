"""`study --serve 'COMMAND'`: the user's own OpenAI-compatible server (vLLM, SGLang, llama.cpp's
llama-server, trtllm-serve ...), started by us once per config of the LLM serving study.

The template names ``{port}`` (required: each server gets a free loopback port), ``{tp}`` (the
tensor-parallel size; a CPU server such as llama-server may take it as threads) and ``{gpus}``
(the GPUs it is pinned to, "0,1"; also set as CUDA_VISIBLE_DEVICES; empty on a box without
GPUs). A config is one server over its GPUs (``tpN``) or N one-GPU servers (``1*N``, replicas),
whose URLs the load spreads over (engine/load/spread.py), as the Triton study's ``1x*N``.

Each server runs under engine.server.guard (its own process group, ended with us even on a
SIGKILL), its output in a log kept beside the recordings and named in every failure. A server is
ready when ``/health`` and ``/v1/models`` both answer 200 within the start budget; one that exits
first or misses the budget fails the config with its log's last line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from engine.errors import UserError
from engine.server.guard import GRACE_S, REAP_S
from engine.server.ports import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
KNOWN = frozenset({"port", "tp", "gpus"})
DEFAULT_START_BUDGET_S = 900.0  # a vLLM start (weights, CUDA graphs) takes minutes; llama-server a second
POLL_S = 0.25


class ServeFailed(Exception):
    """A server of the config did not start or did not stay up: one line, with its log named."""


def check_template(template: str) -> list[str]:
    """The template's words (shlex), or UserError: empty, unbalanced quotes, no {port}, an unknown
    placeholder. Checked before anything starts."""
    try:
        words = shlex.split(template)
    except ValueError as exc:
        raise UserError(f"--serve: cannot split the command ({exc})") from None
    if not words:
        raise UserError("--serve: expected a command, e.g. 'vllm serve MODEL --port {port} -tp {tp}'")
    names = {m.group(1) for w in words for m in PLACEHOLDER.finditer(w)}
    unknown = sorted(names - KNOWN)
    if unknown:
        raise UserError(f"--serve: unknown placeholder {{{unknown[0]}}} (known: {{port}}, {{tp}}, {{gpus}})")
    if "port" not in names:
        raise UserError("--serve: the command must name {port} (each server gets its own port)")
    return words


SECRET_FLAGS = ("--api-key", "--api_key", "--hf-token", "--token")


def shown_template(template: str) -> str:
    """The --serve template as recorded and shown: the value after a key-like flag masked."""
    words = template.split()
    out = []
    for i, w in enumerate(words):
        flag, eq, _ = w.partition("=")
        if eq and flag in SECRET_FLAGS:
            out.append(f"{flag}=***")
        elif i > 0 and words[i - 1] in SECRET_FLAGS:
            out.append("***")
        else:
            out.append(w)
    return " ".join(out)


def fill(words: list[str], port: int, tp: int, gpus: str) -> list[str]:
    values = {"port": str(port), "tp": str(tp), "gpus": gpus}
    return [PLACEHOLDER.sub(lambda m: values[m.group(1)], w) for w in words]


@dataclass(frozen=True)
class ServerPlan:
    """One server of a config: its tensor-parallel size and the GPUs it is pinned to ("" on CPU)."""

    tp: int
    gpus: str


def config_servers(config: str, gpus: list[str]) -> list[ServerPlan]:
    """``tpN``: one server over the first N GPUs; ``1*N``: N servers of one GPU each. Without GPUs
    (``gpus`` empty) each server gets none and {tp} is the config's size alone."""
    if config.startswith("tp"):
        n = int(config[2:])
        return [ServerPlan(n, ",".join(gpus[:n]))]
    n = int(config.split("*", 1)[1])
    return [ServerPlan(1, gpus[i] if gpus else "") for i in range(n)]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = r.read(1 << 20)
            if r.status != 200:
                return False
            if url.endswith("/models"):
                data = json.loads(body).get("data")
                return isinstance(data, list) and bool(data)
            return True
    except (OSError, ValueError, AttributeError, urllib.error.URLError):
        return False


def last_line(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 8192))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    lines = [ln for ln in lines if not ln.startswith("[guard]")] or lines
    return lines[-1][:200] if lines else ""


class ServedServer:
    """One server of the user's command, under our guard."""

    def __init__(self, name: str, argv: list[str], port: int, gpus: str, log_path: Path) -> None:
        self.name, self.argv, self.port, self.gpus, self.log_path = name, argv, port, gpus, log_path
        self.url = f"http://127.0.0.1:{port}/v1"
        self._proc: subprocess.Popen[bytes] | None = None
        self._pipe: object = None

    def start(self) -> None:
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=self.gpus)  # pinned; "" on a CPU box: no GPU
        read_end, write_end = os.pipe()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            log.write(f"[serve] {shown_template(shlex.join(self.argv))}\n"
                      f"[serve] CUDA_VISIBLE_DEVICES={self.gpus!r}\n".encode())
            log.flush()
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "engine.server.guard", "--", *self.argv], stdin=read_end, stdout=log,
                    stderr=subprocess.STDOUT, env=env, cwd=str(PROJECT_ROOT), start_new_session=True)
            finally:
                os.close(read_end)
        self._pipe = os.fdopen(write_end, "wb")  # closed by our death: the guard ends the group

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_text(self) -> str:
        code = self._proc.poll() if self._proc is not None else None
        if code is None:
            return "running"
        if code < 0:
            return f"its guard was killed by {signal.Signals(-code).name}"
        if code > 128:
            return f"killed by {signal.Signals(code - 128).name}" if code - 128 in signal.valid_signals() else f"exit {code}"
        return f"exited with code {code}"

    def failure(self, what: str) -> str:
        tail = last_line(self.log_path)  # first, so that a line cut to fit keeps it; the log's path last
        return f"{self.name} {what}" + (f": {tail}" if tail else "") + f" (log {self.log_path})"

    def wait_ready(self, budget_s: float, stopping: threading.Event) -> None:
        deadline = time.monotonic() + budget_s
        base = f"http://127.0.0.1:{self.port}"
        while not stopping.is_set():
            if not self.alive():
                raise ServeFailed(self.failure(f"{self.exit_text()} before it was ready"))
            if _answers(f"{base}/health") and _answers(f"{base}/v1/models"):
                return
            if time.monotonic() > deadline:
                raise ServeFailed(self.failure(f"did not answer /health and /v1/models within {budget_s:g} s "
                                               "(--serve-start-budget)"))
            stopping.wait(POLL_S)

    def stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the guard ends the server's whole group
        try:
            proc.wait(timeout=GRACE_S + REAP_S + 5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if self._pipe is not None:
            self._pipe.close()  # type: ignore[attr-defined]
            self._pipe = None


class ServedConfig:
    """A config's servers: started together, each waited for, watched while measured, stopped."""

    def __init__(self, config: str, words: list[str], gpus: list[str], log_dir: Path) -> None:
        plans = config_servers(config, gpus)
        self.config = config
        self.servers = []
        for i, plan in enumerate(plans):
            name = f"{config} server {i + 1} of {len(plans)}" if len(plans) > 1 else f"{config} server"
            port = free_port()
            self.servers.append(ServedServer(name, fill(words, port, plan.tp, plan.gpus), port, plan.gpus,
                                             log_dir / f"{config.replace('*', '_')}_server{i + 1}.log"))

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    def start(self, budget_s: float, stopping: threading.Event) -> None:
        """All servers, then each waited for; ServeFailed (all stopped) when one does not come up."""
        try:
            for s in self.servers:
                s.start()
            for s in self.servers:
                s.wait_ready(budget_s, stopping)
        except BaseException:
            self.stop()
            raise

    def died(self) -> str | None:
        """"1*2 server 2 of 2 killed by SIGKILL; log ..." for the first server that is gone, or None."""
        gone = next((s for s in self.servers if not s.alive()), None)
        return gone.failure(gone.exit_text()) if gone is not None else None

    def stop(self) -> None:
        for s in self.servers:
            s.stop()
