"""--metrics-port and --metrics-bind: the live Prometheus endpoint of a run or a study.

The endpoint (engine/metrics_endpoint.py) listens before the source starts, so that a port in
use is one line and exit 2 before anything runs or is recorded; it subscribes to the source's
bus (the recorder's side: the session's thread, never a load worker) and stops when the command
ends.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.bus import EventBus
    from engine.metrics_endpoint import MetricsServer


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0-65535 (0: any free one), found {text!r}")
    return port


def add_metrics_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics-port", type=_port, default=None, metavar="PORT",
                   help="serve the live figures for Prometheus at http://BIND:PORT/metrics while the run lasts "
                        "(0: any free port, printed at the start)")
    p.add_argument("--metrics-bind", default="127.0.0.1", metavar="ADDRESS",
                   help="the address --metrics-port listens on (default: loopback only; 0.0.0.0: every interface)")


class MetricsEndpoint:
    """What the command holds while it runs: the server, or nothing when no port was asked for."""

    def __init__(self, server: MetricsServer | None) -> None:
        self.server = server
        self._unsubscribe: list = []

    def watch(self, bus: EventBus) -> None:
        """Subscribe the endpoint to a source's bus (before the source starts: no event missed)."""
        if self.server is not None:
            self._unsubscribe.append(bus.subscribe(self.server.metrics))

    def close(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        if self.server is not None:
            self.server.close()


@contextmanager
def metrics_endpoint(args: argparse.Namespace, prog: str) -> Iterator[MetricsEndpoint]:
    """Listen now (a bad port raises UserError: one line, exit 2); stop when the block ends."""
    port = getattr(args, "metrics_port", None)
    server = None
    if port is not None:
        from engine.metrics_endpoint import LiveMetrics, MetricsServer

        server = MetricsServer(LiveMetrics(), port, args.metrics_bind)
        print(f"{prog}: metrics: {server.url}", file=sys.stderr, flush=True)
    endpoint = MetricsEndpoint(server)
    try:
        yield endpoint
    finally:
        endpoint.close()
