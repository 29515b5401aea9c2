"""docs/architecture.md's recipe "A live subscriber", done here: a toy Prometheus endpoint, one
callable on a source's bus, sees every event a replay (here) or a live session publishes, and
serves what it counted on loopback while the source runs."""

from __future__ import annotations

import threading
import urllib.request
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine import events as ev
from engine.record.replay_source import ReplaySource
from tests.tui.synthetic import session_events


class MetricsSubscriber:
    """Called on the source's thread: it only updates a few numbers under a lock and returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: Counter[str] = Counter()
        self.throughput_ips: float | None = None

    def __call__(self, event: ev.Event) -> None:
        with self._lock:
            self.events[event.kind] += 1
            handler = _HANDLERS.get(type(event))
            if handler is not None:
                handler(self, event)

    def _on_level_result(self, event: ev.LevelResult) -> None:
        self.throughput_ips = event.throughput_ips

    def exposition(self) -> str:
        """Prometheus's text format."""
        with self._lock:
            lines = [f'gpuscale_events_total{{kind="{kind}"}} {n}' for kind, n in sorted(self.events.items())]
            if self.throughput_ips is not None:
                lines.append(f"gpuscale_level_throughput_ips {self.throughput_ips}")
        return "\n".join(lines) + "\n"


_HANDLERS: dict[type, Callable[[MetricsSubscriber, Any], None]] = {ev.LevelResult: MetricsSubscriber._on_level_result}


def serve(metrics: MetricsSubscriber) -> ThreadingHTTPServer:
    """GET /metrics on a free loopback port, on a thread of its own (never the bus's)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = metrics.exposition().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.slow
def test_a_subscriber_on_a_replay_sees_every_event_and_serves_them(recording: Path) -> None:
    source = ReplaySource(recording, speed=None, linger=False)
    metrics = MetricsSubscriber()
    unsubscribe = source.bus.subscribe(metrics)  # before start: no event is missed
    server = serve(metrics)
    try:
        source.start()
        assert source.join(10)
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        unsubscribe()
    assert 'gpuscale_events_total{kind="level_result"} 4' in text, text
    assert 'gpuscale_events_total{kind="session_ended"} 1' in text, text
    assert "gpuscale_level_throughput_ips " in text
    assert metrics.events == Counter(e.kind for e in session_events())  # every event recorded, once
