"""``python -m engine.telemetry``: JSON lines out, one-line errors, exit codes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.events import event_from_dict
from engine.telemetry.__main__ import main, run
from tests.engine.telemetry.conftest import TRITON_GPU_METRICS

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_module_runs_and_prints_events_as_json_lines():
    proc = subprocess.run(
        [sys.executable, "-m", "engine.telemetry", "--seconds", "1.3", "--host-interval", "0.4"],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    events = [event_from_dict(json.loads(line)) for line in proc.stdout.splitlines()]
    kinds = [e.kind for e in events]
    assert kinds.count("host_sample") >= 2
    assert "warning" in kinds  # no NVIDIA driver here: said once
    assert kinds.count("warning") == 1
    assert "telemetry summary" in proc.stderr and "cpu_percent" in proc.stderr


@pytest.mark.slow
def test_remote_metrics_reach_stdout_and_the_summary(metrics_server):
    metrics_server.body = TRITON_GPU_METRICS
    out, err = io.StringIO(), io.StringIO()
    code = run(["--seconds", "0.7", "--no-nvml", "--metrics-url", metrics_server.url, "--metrics-interval", "0.3",
                "--header", "Authorization: Bearer x"], out=out, err=err)
    assert code == 0
    samples = [json.loads(line) for line in out.getvalue().splitlines() if '"gpu_sample"' in line]
    assert samples and samples[0]["source"] == "triton" and samples[0]["interval_s"] == 0.3
    assert samples[0]["gpus"][0]["util_gpu"] == pytest.approx(87.0)
    assert "[triton] GPU ? " in err.getvalue() and "87%" in err.getvalue()
    assert metrics_server.requests[0]["Authorization"] == "Bearer x"


@pytest.mark.parametrize(
    "argv, phrase",
    [
        (["--seconds", "-1"], "--seconds must be"),
        (["--seconds", "abc"], "--seconds must be a number"),
        (["--metrics-url", "ftp://x/metrics"], "--metrics-url must be an http"),
        (["--metrics-url", "http://host:99999/metrics"], "--metrics-url must be an http"),
        (["--header", "novalue"], "--header must look like"),
        (["--nvml-interval", "0.001"], "--nvml-interval must be"),
        (["--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, phrase, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert phrase in err and err.count("\n") == 1 and "Traceback" not in err
