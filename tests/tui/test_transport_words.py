"""A run says its transport where it starts: an HTTP and a gRPC run of one server read apart in
the headless log (issue 54, item 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_runner import run_cli
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session


@pytest.mark.slow  # writes a synthetic recording and replays it through the CLI
@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_the_headless_log_names_the_transport_in_its_server_ready_and_sweep_lines(tmp_path: Path,
                                                                                   transport: str) -> None:
    events = synthetic_session(SyntheticRun(levels=[1, 4], windows_per_level=1, gpu_count=1, variant="1x",
                                            probe=False, transport=transport))
    proc = run_cli("replay", "--headless", str(record_events(tmp_path / "run.sqlite", events)), timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    ready = next(line for line in lines if "server ready: " in line)
    assert f"at http://127.0.0.1:8000, load over {transport}, Triton 2.53.0" in ready
    started = next(line for line in lines if "] sweep: " in line)
    assert started.endswith(f"sweep: concurrency sweep on openclip_vit_b32 over {transport}")
