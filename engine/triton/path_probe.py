"""The round trip to the server as a request sees it, measured before each level.

The kernel's figures for a connection (connect time, TCP_INFO's RTT) end at the next TCP
endpoint: behind a proxy, a load balancer or a port forward they measure a hop on this machine
and nothing of the path beyond. So the round trip is measured end to end: on a fresh connection
(its connect and TLS handshake left out), the time from writing ``GET /v2/health/ready`` to the
answer's first byte. The server answers that from its HTTP front end in microseconds, so what
remains is the path, there and back. The fastest of a few probes is kept: the others waited
for something besides the path.
"""

from __future__ import annotations

import asyncio
import time

from engine.net import http1
from engine.triton.target import Target

PROBES = 3
PROBE_TIMEOUT_S = 2.0  # a path slower than this is not measured: the level is not held up
METHOD = "health probe"  # how NetworkPath.rtt was measured


async def _one(raw: bytes, endpoint: http1.Endpoint) -> float:
    reader, writer = await asyncio.open_connection(endpoint.host, endpoint.port, ssl=http1.ssl_context(endpoint))
    try:
        started = time.perf_counter()
        writer.write(raw)
        await writer.drain()
        if not await reader.read(1):
            raise ConnectionError("closed before answering")
        return time.perf_counter() - started
    finally:
        writer.close()


async def health_rtt(target: Target, probes: int = PROBES) -> float | None:
    """The fastest of ``probes`` round trips, seconds; None when none was answered (the first
    failure ends the probes: a server that is away costs the level one timeout at most)."""
    try:
        endpoint = http1.parse_endpoint(target.http_url)
    except ValueError:
        return None
    raw = http1.encode_request("GET", endpoint, "/v2/health/ready", {"Connection": "close", **target.headers})
    best: float | None = None
    for _ in range(probes):
        try:
            took = await asyncio.wait_for(_one(raw, endpoint), PROBE_TIMEOUT_S)
        except (OSError, TimeoutError):
            break  # a path that does not answer: no more probes hold the level up
        best = took if best is None else min(best, took)
    return best
