"""A level spread over several servers: its endpoints' rows in the recording and the report (the
headless lines and the TUI: tests/tui/test_endpoint_rows.py)."""

from __future__ import annotations

from pathlib import Path

from engine.events import (
    EndpointResult,
    LatencyStats,
    LevelResult,
    LevelStarted,
    ServerBreakdown,
    ServerReady,
    SessionEnded,
    SessionStarted,
    event_from_dict,
)
from engine.profiles import Hardware, Load, Profile
from engine.record.reader import Recording
from tests.engine.record.synthetic_recordings import record_events
from tests.structs import replace


def _server(total: float) -> ServerBreakdown:
    return ServerBreakdown(request_count=150, inference_count=150, execution_count=75, queue=0.001,
                           compute_input=0.001, compute_infer=0.015, compute_output=0.001, server_total=total)


def _level(index: int, level: float) -> LevelResult:
    lat = LatencyStats(count=300, mean=0.020, p50=0.0185, p90=0.0241, p95=0.02625, p99=0.0312)
    eps = [
        EndpointResult(name="ep1", url="http://a:8000", connections=int(level) // 2 + int(level) % 2, requests=200,
                       throughput_rps=200.0, throughput_ips=200.0, latency=lat, server=_server(0.018)),
        EndpointResult(name="ep2", url="http://b:8000", connections=int(level) // 2, requests=100, errors=7,
                       throughput_rps=100.0, throughput_ips=100.0, latency=lat, server=_server(0.031), failed=True,
                       errors_by_kind={"connection_refused": 7}, error_messages=["connection refused"]),
    ]
    return LevelResult(ts=1000.0 + 10 * index, mode="concurrency", level=level, index=index, status="stable",
                       batch_size=1, windows=3, merged_windows=3, requests=300, errors=7, throughput_rps=300.0,
                       throughput_ips=300.0, latency=lat, server=_server(0.022), endpoints=eps,
                       error_messages=["ep2 (http://b:8000): connection refused"])


def _events() -> list:
    profile = Profile(name="two", hardware=Hardware(gpu_model="A100", gpu_count=1, cost_per_hour=3.6),
                      load=Load(concurrency=[4, 8]))
    events: list = [SessionStarted(ts=990.0, session_id="s", profile_name="two", profile=profile.to_dict(), mode="sweep"),
                    ServerReady(ts=991.0, http_url="http://a:8000", metrics_url=None, embedded=False, model="m",
                                endpoints=["ep1 http://a:8000", "ep2 http://b:8000"])]
    for index, level in enumerate((4.0, 8.0)):
        events += [LevelStarted(ts=995.0 + 10 * index, mode="concurrency", level=level, index=index, total=2),
                   _level(index, level)]
    return [*events, SessionEnded(ts=1100.0, status="ok")]


def test_endpoints_recorded_and_an_old_level_without_them_still_loads() -> None:
    level = _level(0, 4.0)
    assert event_from_dict(level.to_dict()) == level
    old = level.to_dict()
    del old["endpoints"]
    assert event_from_dict(old) == replace(level, endpoints=[])


def test_report_has_a_row_per_endpoint_under_each_level(tmp_path: Path) -> None:
    from engine.record.doc import to_markdown
    from engine.record.findings import analyze
    from engine.record.recording_report import build_report

    with Recording.open(record_events(tmp_path / "two.sqlite", _events())) as rec:
        summary = rec.summary()
    text = to_markdown(build_report(summary, analyze(summary)))
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| 4 "))
    assert lines[start + 1].startswith("|   ep1 | ok ") and lines[start + 2].startswith("|   ep2 | failed ")
    assert "| 4 ep2 | 1.00 |" in text  # its queue vs compute
    assert "Servers | 2, the load spread evenly: ep1 http://a:8000; ep2 http://b:8000" in text


def test_a_server_the_level_gave_no_connection_reads_idle_not_ok() -> None:
    from engine import columns

    lat = LatencyStats(count=10, mean=0.02, p50=0.02, p90=0.02, p95=0.02, p99=0.02)
    busy = EndpointResult(name="ep1", url="http://a:8000", connections=1, requests=10, throughput_rps=10.0,
                          throughput_ips=10.0, latency=lat)
    unused = EndpointResult(name="ep2", url="http://b:8000", connections=0)
    silent = EndpointResult(name="ep3", url="http://c:8000", connections=1, failed=True)
    level = replace(_level(0, 1.0), endpoints=[busy, unused, silent])
    assert [f.status for f in columns.endpoint_figures(level)] == ["ok", "idle", "failed"]
