"""Every read is bounded: a hostile server (tests/reliability/hostile_server.py) that streams an
endless body (chunked, or ended only by a close that never comes) or a 100 MB one, to an
inference, to the model's metadata, to the statistics or to /metrics. The app and its load
workers each stay under RSS_BOUND while it does, and the run ends in bounded time with the
named error (response_too_large) where the stream was the answer it needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from engine.events import LevelResult
from engine.record.reader import Recording
from tests.reliability.hostile_server import HostileTriton, Reply, endless, remote_profile, sized

ROOT = Path(__file__).resolve().parents[2]
RSS_BOUND = 300 << 20  # any one process of the app; it runs at about 60 MB, a worker at about 30
ENDS_WITHIN_S = 60.0  # the control calls' own timeout is 30 s: the cap must end the call before
HUNDRED_MB = 100 << 20

STREAMS = {
    "chunked_endless": lambda: Reply(200, framing="chunked", stream=endless()),
    "close_delimited_endless": lambda: Reply(200, framing="close", stream=endless()),
    "hundred_mb": lambda: Reply(200, stream=sized(HUNDRED_MB), length=HUNDRED_MB),
}


def _run_watched(tmp_path: Path, srv: HostileTriton) -> tuple[int, str, int, float]:
    """Run a short sweep against ``srv``: its exit code, output, the largest RSS any of its
    processes reached, and how long it took. A process past RSS_BOUND ends the run at once."""
    profile = remote_profile(tmp_path / "bounded.toml", srv.where)
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "--record", "--output", str(tmp_path), "--profile", profile],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    peak = 0
    try:
        while proc.poll() is None and time.monotonic() - start < ENDS_WITHIN_S + 30:
            try:
                root = psutil.Process(proc.pid)
                for p in (root, *root.children(recursive=True)):
                    peak = max(peak, p.memory_info().rss)
            except psutil.Error:
                pass
            if peak > RSS_BOUND:
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return proc.returncode, out, peak, time.monotonic() - start


def _level(tmp_path: Path) -> LevelResult:
    (recording,) = tmp_path.glob("*.sqlite")
    with Recording.open(recording) as rec:
        (level,) = [e for e in rec.events(("level_result",)) if isinstance(e, LevelResult)]
    return level


@pytest.mark.slow
@pytest.mark.parametrize("stream", sorted(STREAMS))
def test_an_inference_answer_that_never_ends_or_is_huge_is_refused(stream, tmp_path):
    with HostileTriton(infer=STREAMS[stream]()) as srv:
        code, out, peak, took = _run_watched(tmp_path, srv)
    assert peak < RSS_BOUND, f"a process reached {peak >> 20} MB"
    assert code == 1 and took < ENDS_WITHIN_S, (code, took, out[-3000:])
    assert "Traceback" not in out, out[-3000:]
    level = _level(tmp_path)
    assert level.status == "failed" and level.requests == 0, level
    # a close-delimited answer is refused at its head (Triton frames every answer)
    kind, said = (("bad_response", "without Content-Length") if stream == "close_delimited_endless"
                  else ("response_too_large", "past the cap"))
    # (a stream cut by our close may end the next request on that connection as a reset)
    assert level.errors_by_kind.get(kind, 0) >= 0.9 * level.errors > 0, level.errors_by_kind
    assert set(level.errors_by_kind) <= {kind, "connection_reset"}, level.errors_by_kind
    assert any(said in m for m in level.error_messages), level.error_messages


@pytest.mark.slow
@pytest.mark.parametrize("stream", sorted(STREAMS))
def test_metadata_that_never_ends_or_is_huge_ends_the_run_with_one_line(stream, tmp_path):
    with HostileTriton(metadata=STREAMS[stream]()) as srv:
        code, out, peak, took = _run_watched(tmp_path, srv)
    assert peak < RSS_BOUND, f"the app reached {peak >> 20} MB"
    assert code == 2 and took < ENDS_WITHIN_S, (code, took, out[-3000:])
    assert "Traceback" not in out, out[-3000:]
    (line,) = [x for x in out.splitlines() if x.startswith("gpuscale-tui:")]
    assert "response_too_large" in line and "/v2/models/m" in line, line


@pytest.mark.slow
@pytest.mark.parametrize("endpoint", ["stats", "metrics"])
def test_statistics_or_metrics_that_never_end_leave_the_measurement_alone(endpoint, tmp_path):
    srv = HostileTriton(**{endpoint: Reply(200, framing="close", stream=endless())})
    with srv:
        code, out, peak, took = _run_watched(tmp_path, srv)
    assert peak < RSS_BOUND, f"a process reached {peak >> 20} MB"
    assert code == 0 and took < ENDS_WITHIN_S, (code, took, out[-3000:])
    assert "Traceback" not in out, out[-3000:]
    level = _level(tmp_path)
    assert level.requests > 0 and level.errors == 0, level


@pytest.mark.slow
@pytest.mark.parametrize("stream", sorted(STREAMS))
def test_the_studys_model_control_refuses_a_config_that_never_ends(stream):
    from engine.errors import RunFailed
    from engine.study.model_control import current_config

    with HostileTriton(config=STREAMS[stream]()) as srv:
        start = time.monotonic()
        with pytest.raises(RunFailed, match="response_too_large"):
            current_config(srv.url, "m", {})
    assert time.monotonic() - start < 30


@pytest.mark.slow
@pytest.mark.parametrize("stream", sorted(STREAMS))
def test_a_metrics_page_that_never_ends_is_refused(stream):
    from engine.telemetry.triton_metrics import MetricsUnavailable, fetch_metrics_text

    with HostileTriton(metrics=STREAMS[stream]()) as srv:
        with pytest.raises(MetricsUnavailable, match="larger than"):
            fetch_metrics_text(f"{srv.url}/metrics", timeout=10)
