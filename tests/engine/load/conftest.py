"""Fixtures: what the identity model looks like on the session's embedded Triton (tests/conftest.py)."""

from __future__ import annotations

import asyncio

import pytest

from engine.events import Event
from engine.load.sweep import run_sweep
from engine.load.target import Target, TargetInfo, describe_target
from engine.profiles import Load


@pytest.fixture(scope="session")
def identity_info(identity_server) -> TargetInfo:
    return asyncio.run(describe_target(Target(identity_server.http_url, "identity")))


def quick_load(**overrides) -> Load:
    """Short windows and few levels: a level takes about warmup + 3 windows (~1.5 s)."""
    settings = dict(
        concurrency=[2], window_ms=300, min_window_requests=20, warmup_s=0.3, max_windows=5,
        stability_percent=10.0, stable_windows=3, request_timeout_s=5.0,
    )
    settings.update(overrides)
    return Load(**settings)


class Events(list):
    def of(self, kind: str) -> list[Event]:
        return [e for e in self if e.kind == kind]


async def sweep(target: Target, info: TargetInfo, load: Load, stop: asyncio.Event | None = None):
    events = Events()
    results = await run_sweep(target, info, load, events.append, stop or asyncio.Event())
    return results, events
