"""--metrics-port: a real Prometheus server (Debian's `prometheus` package) scrapes a headless run
against the embedded Triton server, and a query through its HTTP API returns the throughput the
run recorded. A bad port is one line and exit 2, before anything runs."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from engine import events as ev
from engine.record.reader import Recording

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = shutil.which("prometheus")
WAIT_S = 180.0  # the longest we wait for Prometheus to hold a figure: a busy 2-core box is slow, never this slow


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tui.cli", *args]


def _profile(path: Path, url: str, levels: str) -> Path:
    path.write_text(f'''name = "remote"
[server]
kind = "remote"
url = "{url}"
[model]
name = "identity"
[load]
concurrency = [{levels}]
window_ms = 400
max_windows = 4
warmup_s = 0.2
''')
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _query(api: str, promql: str) -> list[dict]:
    url = f"{api}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
    except OSError:  # Prometheus is still starting
        return []
    assert body["status"] == "success", body
    return body["data"]["result"]


def _wait_for(api: str, promql: str, run: subprocess.Popen, prom: subprocess.Popen) -> list[dict]:
    """Poll until Prometheus has a sample of ``promql`` (the condition), or a process died."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        result = _query(api, promql)
        if result:
            return result
        assert run.poll() is None, "the run ended before Prometheus scraped it"
        assert prom.poll() is None, "prometheus exited"
        time.sleep(0.5)
    raise AssertionError(f"Prometheus held no {promql} after {WAIT_S:.0f} s")


@pytest.mark.slow
@pytest.mark.server
@pytest.mark.skipif(PROMETHEUS is None, reason="no `prometheus` binary: Debian's prometheus package is not "
                    "installed (scripts/setup.sh installs it where it runs as root with apt)")
def test_prometheus_scrapes_a_headless_run_and_returns_its_throughput(identity_server, tmp_path: Path) -> None:
    # many short levels: the run outlasts the wait; it is stopped once Prometheus holds the figures
    profile = _profile(tmp_path / "remote.toml", identity_server.http_url, ", ".join(["1", "2"] * 30))
    run_log = (tmp_path / "run.out").open("w")
    run = subprocess.Popen(_cli("--profile", str(profile), "--record", "--no-check", "--output", str(tmp_path / "rec"),
                                "--metrics-port", "0"), cwd=ROOT, stdout=run_log, stderr=subprocess.PIPE, text=True)
    prom = None
    try:
        assert run.stderr is not None
        first = run.stderr.readline()  # the endpoint listens before the session starts and says where
        found = re.search(r"metrics: http://127\.0\.0\.1:(\d+)/metrics", first)
        assert found, first + run.stderr.read()
        target = f"127.0.0.1:{found.group(1)}"
        (tmp_path / "prometheus.yml").write_text(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: gpuscale
    static_configs:
      - targets: ["{target}"]
""")
        web = f"127.0.0.1:{_free_port()}"
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address={web}"],
                                stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"))
        api = f"http://{web}"
        levels = _wait_for(api, 'gpuscale_level_throughput_inferences_per_second{job="gpuscale"}', run, prom)
        window = _wait_for(api, f'gpuscale_window_throughput_inferences_per_second{{job="gpuscale", instance="{target}"}}',
                           run, prom)
        up = _query(api, 'up{job="gpuscale"}')
        run.send_signal(signal.SIGINT)
        assert run.wait(120) in (0, 130), run.stderr.read()
    finally:
        for proc in (run, prom):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(30)
        run_log.close()
    assert up and up[0]["value"][1] == "1"

    [recording] = (tmp_path / "rec").glob("*.sqlite")
    with Recording.open(recording) as rec:
        events = list(rec.events(("level_result", "window")))
    recorded_levels = {(str(int(e.level)), e.throughput_ips) for e in events if isinstance(e, ev.LevelResult)}
    recorded_windows = {e.throughput_ips for e in events if isinstance(e, ev.WindowResult)}
    for series in levels:  # each level Prometheus holds is one the run recorded, at the same throughput
        assert series["metric"]["mode"] == "concurrency"
        assert (series["metric"]["level"], float(series["value"][1])) in recorded_levels, (series, recorded_levels)
        assert float(series["value"][1]) > 0
    assert float(window[0]["value"][1]) in recorded_windows


@pytest.mark.slow
def test_a_port_out_of_range_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(_cli("--record", "--metrics-port", "70000", "--output", str(tmp_path)), cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "gpuscale-tui: error: argument --metrics-port: expected a port 0-65535 (0: any free one), found '70000' (see --help)"]


@pytest.mark.slow
def test_a_port_in_use_is_one_line_and_exit_2_and_nothing_runs(tmp_path: Path) -> None:
    profile = _profile(tmp_path / "remote.toml", "http://127.0.0.1:9", "1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(_cli("--profile", str(profile), "--record", "--output", str(tmp_path / "rec"),
                                   "--metrics-port", str(port)), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"gpuscale-tui: error: --metrics-port {port}: cannot listen on 127.0.0.1:{port}: in use"]
    assert not (tmp_path / "rec").exists() or not list((tmp_path / "rec").iterdir())
