"""Several servers from the command line (--url given once per server): bad input is one line
and exit 2, naming the endpoint; two real servers give a recording with each one's figures."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from engine.events import LevelResult
from engine.record.reader import Recording
from tests.cli_runner import run_cli

QUICK = ["--set", "load.max_trials=1", "--set", "load.contended_percent=100",  # the box-noise rule off (tests/conftest.py)
         "--set", "model.name=identity", "--set", "load.window_ms=400", "--set", "load.warmup_s=0.3",
         "--set", "load.max_windows=4", "--no-check"]


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_cli(*args, timeout=timeout)


def _one_line_exit_2(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.slow
def test_duplicate_endpoint_is_one_line(tmp_path: Path) -> None:
    line = _one_line_exit_2(_run("run", "--record", "-o", str(tmp_path), "--url", "http://127.0.0.1:8000",
                                 "--url", "http://127.0.0.1:8010", "--url", "http://127.0.0.1:8000/"))
    assert "server.urls: endpoint ep3 (http://127.0.0.1:8000/) duplicates ep1" in line


@pytest.mark.slow
def test_metrics_urls_must_match_the_servers(tmp_path: Path) -> None:
    line = _one_line_exit_2(_run("run", "--record", "-o", str(tmp_path), "--url", "http://127.0.0.1:8000",
                                 "--url", "http://127.0.0.1:8010", "--metrics-url", "http://127.0.0.1:8002/metrics"))
    assert "server.metrics_urls: expected one per URL of server.urls (2), found 1" in line


@pytest.mark.slow
def test_unreachable_endpoint_at_start_is_one_line(tmp_path: Path) -> None:
    line = _one_line_exit_2(_run("run", "--record", "--no-record", *QUICK, "--url", "http://127.0.0.1:9",
                                 "--url", "http://127.0.0.1:11"))
    assert "endpoint ep1 (http://127.0.0.1:9): cannot reach Triton at http://127.0.0.1:9: connection refused" in line


@pytest.mark.slow
@pytest.mark.server
def test_two_servers_from_the_command_line(identity_server, tmp_path: Path) -> None:
    from engine.server.embedded import EmbeddedServer

    with EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path / "ep2") as second:
        proc = _run("run", "--record", "-o", str(tmp_path), *QUICK, "--set", "load.concurrency=3",
                    "--url", identity_server.http_url, "--url", second.http_url,
                    "--metrics-url", identity_server.metrics_url, "--metrics-url", second.metrics_url)
    assert proc.returncode == 0, proc.stderr
    assert "2 servers (ep1 " in proc.stdout
    rows = [line.split() for line in proc.stdout.splitlines()]
    names = [row[0] for row in rows if row]
    assert "ep1" in names and "ep2" in names
    (path,) = tmp_path.glob("*.sqlite")
    with Recording.open(path) as rec:
        (level,) = [e for e in rec.events() if isinstance(e, LevelResult)]
    assert sorted(ep.connections for ep in level.endpoints) == [1, 2]
    assert sum(ep.requests for ep in level.endpoints) == level.requests > 0
