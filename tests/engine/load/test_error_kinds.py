"""Error kinds are named by what happened, whatever the transport; recordings made when they were
named by HTTP status class read with today's names (engine/events.py maps them)."""

from __future__ import annotations

from engine.events import LevelResult, WindowResult, event_from_dict
from engine.load.error_text import errors_line


def _level(errors_by_kind: dict[str, int]) -> dict:
    return {"kind": "level_result", "v": 1, "ts": 1.0, "mode": "concurrency", "level": 4.0, "index": 0,
            "status": "failed", "batch_size": 1, "windows": 3, "merged_windows": 3, "requests": 0, "errors": 9,
            "throughput_rps": 0.0, "throughput_ips": 0.0, "latency": {"count": 0}, "errors_by_kind": errors_by_kind,
            "error_messages": ["HTTP 400: unexpected shape"]}


def test_an_older_recordings_http_kinds_read_as_rejected_and_server_error():
    event = event_from_dict(_level({"http_4xx": 5, "http_5xx": 3, "timeout": 1}))
    assert isinstance(event, LevelResult)
    assert event.errors_by_kind == {"rejected": 5, "server_error": 3, "timeout": 1}
    assert errors_line(event.errors_by_kind, event.error_messages) == \
        "rejected x5, server_error x3, timeout x1 (first: HTTP 400: unexpected shape)"


def test_old_and_new_names_in_one_window_add_up():
    window = event_from_dict({"kind": "window", "v": 1, "ts": 1.0, "level": 2.0, "index": 0, "warmup": False,
                              "t_start": 0.0, "t_end": 1.0, "requests": 0, "errors": 3, "throughput_rps": 0.0,
                              "throughput_ips": 0.0, "latency": {"count": 0},
                              "errors_by_kind": {"rejected": 1, "http_4xx": 2}})
    assert isinstance(window, WindowResult) and window.errors_by_kind == {"rejected": 3}


def test_todays_names_pass_through_untouched():
    kinds = {"rejected": 2, "connection_refused": 1}
    event = event_from_dict(_level(kinds))
    assert isinstance(event, LevelResult) and event.errors_by_kind == kinds
