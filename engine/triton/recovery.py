"""Between levels: a server that went away (restart, crash) is waited for before the next level.

Without this, every level after an outage fails in its first window while Triton is still
starting, and a restart that takes ten seconds costs the rest of the sweep.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from engine.errors import UserError
from engine.triton.target import Target, _get

POLL_S = 0.5


async def wait_until_ready(target: Target, stop: asyncio.Event, timeout_s: float) -> float | None:
    """Poll /v2/health/ready; seconds waited when it answers 200, None on timeout or stop."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s and not stop.is_set():
        # each probe gets only what is left of the wait: a server that accepts connections and
        # never answers (hung, SIGSTOPped) would otherwise hold it for the control-call timeout
        left = timeout_s - (time.monotonic() - start)
        probe = dataclasses.replace(target, timeout_s=max(0.05, min(target.timeout_s, left)))
        try:
            reply = await _get(probe, "/v2/health/ready")
            if reply.status == 200:
                return time.monotonic() - start
        except UserError:  # not reachable yet
            pass
        try:
            await asyncio.wait_for(stop.wait(), POLL_S)
        except TimeoutError:
            pass
    return None
