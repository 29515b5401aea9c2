"""Waiting for a lost server between levels (engine/triton/recovery.py) against real sockets."""

from __future__ import annotations

import asyncio

import pytest

from engine.triton.recovery import wait_until_ready
from engine.triton.target import Target


@pytest.mark.slow
def test_a_server_that_accepts_and_never_answers_ends_the_wait_at_its_limit():
    """A hung server (connections accepted, no answer) must not hold the wait for the control
    call's own timeout: server_wait_s = 2 ends it, not the 30 s of Target.timeout_s."""

    async def scenario() -> float | None:
        held: list[asyncio.StreamWriter] = []

        async def hold(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            held.append(writer)  # keep the connection open, never answer

        server = await asyncio.start_server(hold, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        target = Target(f"http://127.0.0.1:{port}", "identity", timeout_s=3600.0)
        try:
            # the outer bound only keeps a regression from hanging the suite for an hour
            return await asyncio.wait_for(wait_until_ready(target, asyncio.Event(), 0.3), 60)
        finally:
            for writer in held:
                writer.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(scenario()) is None
