"""The log says the client's verdict once per level, on the level's line: a window (warm-up or
measured) flagged by its own audit says nothing of it, so no line contradicts the level's row."""

from __future__ import annotations

from engine import events as ev
from tui.describe import describe, severity

BOUND = ev.ClientAudit(client_bound=True, reasons=["our side adds 6.0 % of the mean latency"])


def _window(warmup: bool, audit: ev.ClientAudit) -> ev.WindowResult:
    return ev.WindowResult(level=16.0, index=0 if warmup else 1, warmup=warmup, t_start=0.0, t_end=1.0, requests=100,
                           errors=0, throughput_rps=100.0, throughput_ips=100.0, latency=ev.LatencyStats(count=100),
                           audit=audit, stable_so_far=False)


def _level(audit: ev.ClientAudit) -> ev.LevelResult:
    return ev.LevelResult(mode="concurrency", level=16.0, index=0, status="stable", batch_size=1, windows=3,
                          merged_windows=3, requests=300, errors=0, throughput_rps=100.0, throughput_ips=100.0,
                          latency=ev.LatencyStats(count=300), audit=audit)


def test_a_window_flagged_alone_is_not_a_verdict() -> None:
    for warmup in (True, False):
        window = _window(warmup, BOUND)
        assert "client-bound" not in (describe(window) or "")
        assert severity(window) == "info"
    quiet = _level(ev.ClientAudit())
    assert "client-bound" not in (describe(quiet) or "") and severity(quiet) == "info"


def test_the_levels_line_carries_its_verdict() -> None:
    bound = _level(BOUND)
    assert ", client-bound" in (describe(bound) or "") and severity(bound) == "warning"
