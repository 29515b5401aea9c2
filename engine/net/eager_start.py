"""Start a coroutine now, in the caller's turn of the loop, and finish it in a task.

A task made by ``create_task`` first runs a loop pass later, behind every callback queued
meanwhile (at 32 streams, the other streams' responses). For a write, that pass is a request
handed to the network later than perf_analyzer's threads hand theirs. Python 3.12's eager task
factory does this for a whole loop; this does it for one coroutine, on 3.11 too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


def start_eagerly(coro: Coroutine[Any, Any, None], loop: asyncio.AbstractEventLoop) -> asyncio.Task[None] | None:
    """Run ``coro`` up to its first wait; None when it ended there, else the task that finishes it.
    An exception raised before the first wait is raised here, as a call's would be."""
    try:
        waited = coro.send(None)
    except StopIteration:
        return None
    return loop.create_task(_finish(coro, waited))


async def _finish(coro: Coroutine[Any, Any, None], waited: Any) -> None:
    """Drive ``coro`` on from where it waits, as a task's own step would: each future it yields
    awaited here, its result or exception handed back in."""
    while True:
        try:
            if waited is None:
                await asyncio.sleep(0)  # a bare yield: one loop pass
            else:
                waited._asyncio_future_blocking = False  # taken, as a task takes what its coroutine yields
                await waited
        except BaseException as exc:  # noqa: BLE001 - the coroutine decides, as under a task
            try:
                waited = coro.throw(exc)
            except StopIteration:
                return
            continue
        try:
            waited = coro.send(None)
        except StopIteration:
            return
