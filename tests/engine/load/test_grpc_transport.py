"""load.transport = grpc (engine/triton/transports/grpc.py) against a real tritonserver on CPU: both
load modes over KServe v2 gRPC, the server's refusals in its own words, a server that goes away,
answers that do not add up, and a recorded session whose report and comparison name the
transport."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine.load.audit import delay_limit
from engine.server.embedded import EmbeddedServer
from engine.triton.answer_check import AnswerSpec, check_header
from engine.triton.target import Target, TargetInfo, describe_target
from engine.triton.transports.grpc import check_answer, error_kind, grpc_address
from engine.triton.transports.grpc_common import messages
from tests.cli_runner import run_cli_inproc
from tests.engine.load.conftest import in_flight, in_flight_most, quick_load, sweep

REPO = Path(__file__).resolve().parents[3]


def test_the_grpc_endpoint_is_the_http_port_plus_one_unless_given():
    assert grpc_address(Target("http://10.0.0.5:8000", "m")) == ("10.0.0.5:8001", False)
    assert grpc_address(Target("https://[::1]:9000", "m")) == ("[::1]:9001", True)
    assert grpc_address(Target("http://h:8000", "m", grpc_url="grpc.example:443")) == ("grpc.example:443", False)


def test_the_embedded_server_keeps_tritons_layout(identity_server):
    assert identity_server.grpc_port == identity_server.http_port + 1
    assert grpc_address(Target(identity_server.http_url, "identity"))[0] == identity_server.grpc_url


def test_the_port_pair_is_adjacent_and_falls_back_when_the_next_port_is_taken():
    import socket

    from engine.server.ports import free_port_pair

    http, grpc_port = free_port_pair()
    assert grpc_port == http + 1
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        below = taken.getsockname()[1] - 1
        first, second = free_port_pair(first=below)  # a restart on a fixed HTTP port whose next is in use
    assert first == below and second not in (below, below + 1)


def test_a_failed_call_is_named_by_what_happened():
    assert error_kind("NOT_FOUND", "Request for unknown model") == "rejected"
    assert error_kind("INVALID_ARGUMENT", "unexpected shape") == "rejected"
    assert error_kind("INTERNAL", "backend failed") == "server_error"
    assert error_kind("RESOURCE_EXHAUSTED", "Received message larger than max (5000000 vs. 1048576)") == "response_too_large"
    assert error_kind("RESOURCE_EXHAUSTED", "Exceeds maximum queue size") == "server_error"


def _answer(shape: list[int], raw: list[bytes], datatype: str = "FP32", name: str = "OUTPUT0") -> Any:
    reply = messages().ModelInferResponse(model_name="m")
    out = reply.outputs.add()
    out.name, out.datatype = name, datatype
    out.shape.extend(shape)
    reply.raw_output_contents.extend(raw)
    return reply


def test_an_answer_that_does_not_add_up_is_named():
    asked = (("OUTPUT0", "FP32"),)
    assert check_answer(_answer([2, 4], [bytes(32)]), asked) is None
    assert check_answer(_answer([2, 4], [bytes(31)]), asked) == ("output 'OUTPUT0': 31 bytes for shape [2, 4] of FP32, "
                                                                 "which holds 32")
    assert check_answer(_answer([2, 4], [bytes(32)], datatype="INT32"), asked) == "output OUTPUT0 is INT32, expected FP32"
    assert check_answer(_answer([2, 4], [bytes(32)], name="OTHER"), asked) == "answer lacks output OUTPUT0"
    assert check_answer(_answer([2, 4], []), asked) == "answer has 0 raw outputs for 1 outputs"


def test_grpc_answers_are_checked_as_http_answers_are():
    """One check for both protocols: a negative dimension is no size, whatever the byte count
    (shape [-1, -4] "holds" 16 bytes of FP32 by arithmetic)."""
    asked = (("OUTPUT0", "FP32"),)
    grpc_said = check_answer(_answer([-1, -4], [bytes(16)]), asked)
    http_said = check_header(json.dumps({"outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, -4],
                                                      "parameters": {"binary_data_size": 16}}]}).encode(), 16,
                             AnswerSpec(outputs={"OUTPUT0": "FP32"}))
    assert grpc_said == http_said == "output 'OUTPUT0': shape is not a list of sizes"


async def test_grpc_against_an_http1_port_says_it_is_not_a_grpc_server():
    """grpcio only says "unavailable" (20 s of every error classed "connection refused", though
    the port is open): the sweep is refused before any load, naming what the port is."""
    from engine.errors import UserError
    from engine.triton.transports.grpc import not_grpc
    from tests.reliability.hostile_server import HostileTriton, identity_model

    with HostileTriton() as srv:
        said = await not_grpc(srv.where)
        assert said is not None and f"{srv.where} is not a gRPC server: it answers but not HTTP/2" in said
        meta = identity_model()
        info = TargetInfo(model_config={"max_batch_size": 8}, inputs=meta["inputs"], outputs=meta["outputs"],
                          max_batch_size=8)
        with pytest.raises(UserError, match="is not a gRPC server"):
            await sweep(Target(srv.url, "m", grpc_url=srv.where), info, quick_load(concurrency=[1], transport="grpc"))
        assert not [s for s in srv.seen if s.path.endswith("/infer")]
    assert await not_grpc("127.0.0.1:9") is None  # nothing listening: the sweep's own errors say so


@pytest.mark.server
async def test_tritons_grpc_port_is_taken_for_grpc_and_its_http_port_is_not(identity_server):
    assert await not_grpc_of(identity_server.grpc_url) is None
    said = await not_grpc_of(identity_server.http_url)
    assert said is not None and "is not a gRPC server" in said


async def not_grpc_of(url: str) -> str | None:
    from engine.triton.transports.grpc import not_grpc

    return await not_grpc(url.split("://", 1)[-1])


@pytest.mark.server
async def test_a_concurrency_sweep_over_grpc(identity_server, identity_info):
    load = quick_load(concurrency=[1, 4], transport="grpc", stability_percent=50)
    breakdowns = 0
    for _ in range(4):  # a busy box may read the statistics too far from a window's edge: measured again
        results, events = await sweep(Target(identity_server.http_url, "identity"), identity_info, load)
        assert [r.level for r in results] == [1.0, 4.0]
        read = 0
        for r in results:
            assert r.status in ("stable", "unstable") and r.errors == 0, (r.status, r.error_messages)
            assert r.requests > 0 and r.latency.p50 is not None and r.latency.p50 > 0
            if r.server is None:  # left out, and said why (sweep.server_over)
                assert any(w.key == f"late-stats-{r.index}" for w in events.of("warning")), r
            else:
                assert r.server.request_count > 0  # Triton's statistics, read over HTTP
                read += 1
        breakdowns += read
        if read == len(results):
            break
    assert breakdowns, "the statistics came late at every level of 4 sweeps"
    # the closed loop kept exactly the level in flight: one call per connection
    r4 = results[1]
    assert 0.5 * 4 <= in_flight(r4) <= in_flight_most(r4), (r4.throughput_rps, r4.latency.mean, r4.latency.max)
    assert not events.of("error")


@pytest.mark.server
async def test_a_rate_sweep_over_grpc(identity_server, identity_info):
    # windows of 1.5 s: a busy box stalls a client for tens of ms now and then, a tenth of a
    # 300 ms window's requests at these rates, and the figure asserted is the rate itself
    load = quick_load(mode="rate", rates=[50.0, 200.0], arrival="constant", transport="grpc", stability_percent=50,
                      window_ms=1500)
    results, events = await sweep(Target(identity_server.http_url, "identity"), identity_info, load)
    assert [r.level for r in results] == [50.0, 200.0]
    for r in results:
        assert r.errors == 0, r.error_messages
        assert r.throughput_rps == pytest.approx(r.level, rel=0.15)
    assert not events.of("error")


@pytest.mark.server
async def test_the_servers_refusals_are_counted_in_its_own_words(identity_server, identity_info):
    load = quick_load(concurrency=[2], transport="grpc", on_level_failure="stop")
    (r,), events = await sweep(Target(identity_server.http_url, "nope"), identity_info, load)
    assert r.status == "failed" and r.requests == 0 and set(r.errors_by_kind) == {"rejected"}
    assert r.error_messages[0].startswith("gRPC NOT_FOUND: ") and "'nope'" in r.error_messages[0]
    # a shape the model does not take
    target = Target(identity_server.http_url, "identity", input_shapes={"INPUT0": [3]})
    (r,), _ = await sweep(target, identity_info, load)
    assert set(r.errors_by_kind) == {"rejected"}, r.errors_by_kind
    assert r.error_messages[0].startswith("gRPC INVALID_ARGUMENT: "), r.error_messages


def _kill_tritonserver(server: EmbeddedServer) -> None:
    found = subprocess.run(["pgrep", "-P", str(server.pid), "tritonserver"], capture_output=True, text=True).stdout.split()
    assert found, "no tritonserver under the guard"
    os.kill(int(found[0]), signal.SIGKILL)


@pytest.mark.server
async def test_a_server_that_goes_away_is_lost_connections_not_a_hang(tmp_path: Path):
    server = EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path).start()
    try:
        target = Target(server.http_url, "identity")
        info = await describe_target(target)
        load = quick_load(concurrency=[4], transport="grpc", window_ms=500, max_windows=40,
                          stability_percent=0.001, request_timeout_s=3.0)
        # killed, not stopped: a graceful stop unloads the model first and answers "no available versions"
        stopper = asyncio.get_running_loop().run_in_executor(None, lambda: (time.sleep(3.0), _kill_tritonserver(server)))
        # a bound on a hang (a sweep waiting forever on dead connections), not on speed: on a busy
        # box the level's windows take what they take
        (r,), _events = await asyncio.wait_for(sweep(target, info, load), 600)
        await stopper
    finally:
        server.stop()
    lost = {"connection_reset", "connection_refused", "connect_error", "timeout"}
    assert r.errors > 0 and set(r.errors_by_kind) <= lost, r.errors_by_kind
    assert all("Traceback" not in m and len(m) <= 240 for m in r.error_messages), r.error_messages


@pytest.mark.server
@pytest.mark.slow
def test_a_recorded_grpc_session_is_reported_and_compared_by_its_transport(tmp_path: Path, identity_server):
    """The identity model over gRPC, recorded; its report says how the inputs travelled, and a
    comparison with the same run over HTTP says the transports differ. (The export and the compare
    start nothing: they run in this process, tests/cli_runner.py.)"""
    recordings = []
    for transport in ("grpc", "http"):
        out = tmp_path / transport
        run = subprocess.run(
            [sys.executable, "-m", "tui.cli", "--record", "--output", str(out), "--no-check", "--url", identity_server.http_url,
             "--set", "model.name=identity", "--set", f"load.transport={transport}", "--set", "load.concurrency=2",
             "--set", "load.window_ms=500", "--set", "load.max_windows=4", "--set", "load.stability_percent=50",
             "--set", "load.warmup_s=0.5"],
            cwd=REPO, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        (recording,) = out.glob("*.sqlite")
        recordings.append(recording)
    md = run_cli_inproc("export", str(recordings[0]), "--format", "md", "--out", str(tmp_path / "md"))
    assert md.returncode == 0, md.stderr
    (page,) = (tmp_path / "md").glob("*.md")
    assert "inputs by gRPC message" in page.read_text()
    compared = run_cli_inproc("compare", *map(str, recordings), "--format", "text")
    assert compared.returncode == 0, compared.stderr
    assert "transport differs: grpc (" in " ".join(compared.stdout.split()), compared.stdout


@pytest.mark.server
async def test_our_part_of_each_call_is_measured_and_judged(identity_server, identity_info):
    """Over gRPC our side's time per request is measured (on our own HTTP/2: the answer unread
    since the kernel's receive time, and reading it), and the level's verdict follows it:
    flagged where it passes the transport's limit of the mean latency (10 %). A worker whose
    loop is held busy (19 ms of every 20) leaves answers waiting: that is measured, and the level
    is flagged for it."""
    transport = "grpc"
    limit = delay_limit(transport)
    target = Target(identity_server.http_url, "identity")
    # the stalled wait is held against the quiet run's; a box that starves the quiet run instead
    # (others took 96 % of the CPU once, its answers waited 27 ms) measures the pair again, up to 3 times
    for _attempt in range(3):
        (quiet,), _ = await sweep(target, identity_info, quick_load(concurrency=[1], transport=transport,
                                                                    stability_percent=50))
        assert quiet.errors == 0 and quiet.audit.client_delay_p50 is not None and quiet.audit.client_delay_p50 > 0
        measured = quiet.audit.client_delay_fraction
        assert measured is not None and measured > 0
        assert any(r.startswith("our side adds") for r in quiet.audit.reasons) == (measured > limit), quiet.audit

        (stalled,), _ = await sweep(target, identity_info, quick_load(concurrency=[4], transport=transport,
                                                                      stability_percent=50, dev_stall_ms=19, workers=1))
        assert stalled.errors == 0
        # the loop is held 19 ms of every 20: four calls in flight answer at any moment, so most
        # answers wait for it (about 9 ms on average). What share of the latency that is depends on
        # how slow a busy box makes the server, so the verdict is checked against the measured share,
        # and the wait against the quiet run's; the kernel's receive stamp: the wait is measured whole
        share = stalled.audit.client_delay_fraction
        assert share is not None and quiet.latency.mean is not None and stalled.latency.mean is not None
        if share * stalled.latency.mean > measured * quiet.latency.mean:
            break
    assert share * stalled.latency.mean > measured * quiet.latency.mean, (stalled.audit, quiet.audit)
    flagged = any(r.startswith("our side adds") for r in stalled.audit.reasons)
    assert flagged == (share > limit) and (not flagged or stalled.audit.client_bound), stalled.audit
