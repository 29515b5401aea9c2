"""Fixtures: what the identity model looks like on the session's embedded Triton (tests/conftest.py),
and toy_llm (a streaming model) on one embedded Triton of its own for the session."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import psutil
import pytest

from engine.events import Event, LevelResult
from engine.load.sweep import run_sweep
from engine.net.http1 import parse_endpoint
from engine.profiles import Load
from engine.triton.answer_check import AnswerSpec
from engine.triton.api import TritonApi
from engine.triton.request import request_inputs
from engine.triton.target import Target, TargetInfo, describe_target
from engine.triton.transports import SweepInputs, http
from engine.triton.transports.http import HttpPayload


@pytest.fixture(scope="session")
def identity_info(identity_server) -> TargetInfo:
    return asyncio.run(describe_target(Target(identity_server.http_url, "identity")))


@pytest.fixture(scope="session")
def toy_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Target, TargetInfo]]:
    """toy_llm (decoupled: MAX_TOKENS responses a request, each with its INDEX) on an embedded
    Triton shared by the streaming tests that only send it load (a start and graceful stop cost
    about 5 s); a module that stops, kills or reconfigures its server starts its own."""
    from engine.server.embedded import EmbeddedServer

    with EmbeddedServer(model="toy_llm", variant="cpu", log_dir=tmp_path_factory.mktemp("triton-toy-llm")) as srv:
        target = Target(srv.http_url, "toy_llm")
        yield target, asyncio.run(describe_target(target))
        kill_tritonserver(srv)  # a graceful stop unloads the model for seconds, and nothing here is about the stop


def quick_load(**overrides) -> Load:
    """Short windows and few levels: a level takes about warmup + 3 windows (~1.5 s)."""
    settings = dict(
        concurrency=[2], window_ms=300, min_window_requests=20, warmup_s=0.3, max_windows=5,
        stability_percent=10.0, stable_windows=3, request_timeout_s=5.0,
    )
    settings.update(overrides)
    return Load(**settings)


def in_flight(result: LevelResult) -> float:
    """Throughput x mean latency over the level's measured span: the requests in flight on average
    (Little's law), at most the concurrency."""
    return result.throughput_rps * (result.latency.mean or 0.0)


def in_flight_most(result: LevelResult) -> float:
    """The most ``in_flight`` can read at this concurrency: the requests in flight when the span
    began count their whole latency, up to the longest, so a stall just before the span (a busy
    box) lifts it by up to level x max latency / span."""
    return result.level * (1.0 + (result.latency.max or 0.0) / result.duration_s)


class Events(list):
    def of(self, kind: str) -> list[Event]:
        return [e for e in self if e.kind == kind]


async def first_measured_window(events: Events, timeout_s: float = 20.0) -> None:
    """Until the sweep has published a window past its warm-up."""
    deadline = time.monotonic() + timeout_s
    while not any(not w.warmup for w in events.of("window")):
        assert time.monotonic() < deadline, "no measurement window"
        await asyncio.sleep(0.02)


def kill_tritonserver(server) -> None:
    """SIGKILL an embedded server's tritonserver: a graceful stop keeps serving open connections
    for seconds."""
    (triton,) = [p for p in psutil.Process(server.pid).children(recursive=True) if p.name() == "tritonserver"]
    triton.kill()


async def sweep(target: Target, info: TargetInfo, load: Load, stop: asyncio.Event | None = None):
    events = Events()
    results = await run_sweep(TritonApi(target, info), load, events.append, stop or asyncio.Event())
    return results, events


def http_payload(url: str, info: TargetInfo | None = None) -> HttpPayload:
    """What the http transport hands each load worker for ``url``: the identity model's request
    of one item, or no request at all (connections only) without ``info``."""
    if info is None:
        e = parse_endpoint(url)
        return HttpPayload(e.host, e.port, e.tls, e.host, (b"",), AnswerSpec({}))
    target = Target(url, "identity")
    sweep = SweepInputs(target, info, 1, "random", request_inputs(target, info, 1))
    return http.TRANSPORT.prepared(sweep).payload


def use_http(worker, url: str, info: TargetInfo | None = None) -> None:
    """A worker driven in this process, given the sweep's http transport as its UseTransport message would."""
    worker.take_transport(http.TRANSPORT.dialer(worker, http_payload(url, info)))
