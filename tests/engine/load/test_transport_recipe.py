"""Adding a transport is one module, its entry in TRANSPORTS and its tests (docs/architecture.md,
Recipes, "A transport"). Here a toy protocol that is not HTTP (tests/engine/load/echo_transport.py:
length-prefixed frames over TCP) is registered and carries real sweeps: real load worker
processes, the scheduler unchanged, against a real server of that protocol. Two files: that
module and this one."""

from __future__ import annotations

import pytest

from engine.analysis.wire import carries
from engine.events import WireCeiling
from engine.profiles import load_profile
from engine.transport_table import TRANSPORTS, TransportSpec, transport_spec
from engine.triton.target import Target, TargetInfo
from tests.engine.load.conftest import in_flight, in_flight_most, quick_load, sweep
from tests.engine.load.echo_transport import EchoServer

ECHO = TransportSpec("echo", "tests.engine.load.echo_transport", "echo frames", "the echo path", "frames")
INFO = TargetInfo(model_config={}, inputs=[{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 16]}],
                  outputs=[{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 16]}], max_batch_size=8)


@pytest.fixture
def echo(monkeypatch: pytest.MonkeyPatch) -> TransportSpec:
    monkeypatch.setitem(TRANSPORTS, ECHO.name, ECHO)  # the registration: one entry
    return ECHO


@pytest.mark.slow
async def test_a_sweep_runs_over_a_registered_transport_that_is_not_http(echo):
    server = EchoServer()
    port = await server.start()
    try:
        load = quick_load(concurrency=[1, 4], transport="echo", stability_percent=50, batch_size=2)
        results, events = await sweep(Target(f"echo://127.0.0.1:{port}", "echo"), INFO, load)
    finally:
        await server.close()
    assert [r.level for r in results] == [1.0, 4.0]
    for r in results:
        assert r.status in ("stable", "unstable") and r.errors == 0, (r.status, r.error_messages)
        assert r.requests > 0 and r.latency.p50 is not None and r.latency.p50 > 0
        assert r.server is None  # not Triton: no server statistics, and no warning for lacking them
        assert r.audit.write_p50 is not None and r.audit.first_byte_p50 is not None  # the transport's timings
    # the closed loop kept exactly the level in flight: throughput x latency ~ concurrency
    r4 = results[1]
    assert 0.5 * 4 <= in_flight(r4) <= in_flight_most(r4), (r4.throughput_rps, r4.latency.mean, r4.latency.max)
    assert server.answered >= sum(r.requests for r in results)
    assert not events.of("error")


@pytest.mark.slow
async def test_its_refusals_are_counted_by_what_happened_in_its_own_words(echo):
    server = EchoServer(model="echo")
    port = await server.start()
    try:
        load = quick_load(concurrency=[2], transport="echo", on_level_failure="stop")
        results, events = await sweep(Target(f"echo://127.0.0.1:{port}", "nope"), INFO, load)
    finally:
        await server.close()
    (r,) = results
    assert r.status == "failed" and r.requests == 0
    assert set(r.errors_by_kind) == {"rejected"}
    assert r.error_messages and r.error_messages[0] == "echo status 1: unknown model 'nope'"
    (error,) = events.of("error")
    assert "rejected" in error.message


def test_profiles_and_reports_read_the_registered_entry(echo):
    profile = load_profile("local", ["load.transport=echo"])
    assert profile.load.transport == "echo"
    wire = WireCeiling(model="m", transport="echo", batch_size=1, bytes_per_item=64, approximated=False, levels=[],
                       peak_ips=None, saturated=False, peak_client_bound=False, request_bytes=4096)
    assert carries(wire) == "the echo path gave no result with 4.1 KB frames"
    assert transport_spec("echo").inputs_by == "echo frames"


def test_an_unregistered_transport_is_one_clear_line():
    from engine.profiles import ProfileError

    with pytest.raises(ProfileError, match="load.transport"):
        load_profile("local", ["load.transport=echo"])
