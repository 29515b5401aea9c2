"""load.transport = system_shm against the real embedded Triton: inputs in /dev/shm regions the
server maps, registered for the sweep and gone after it, also after a SIGKILL of the tool."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from engine.load.sweep import run_sweep
from engine.shm_segments import segment_prefix
from engine.triton.api import TritonApi
from engine.triton.target import Target
from tests.engine.load.conftest import Events, quick_load

REPO = Path(__file__).resolve().parents[3]


def _our_segments(pid: int | None = None) -> list[str]:
    return [n for n in os.listdir("/dev/shm") if n.startswith(segment_prefix(pid))]


def _registered(url: str) -> list[str]:
    with urllib.request.urlopen(f"{url}/v2/systemsharedmemory/status", timeout=10) as reply:  # noqa: S310 - loopback
        return [r["name"] for r in json.loads(reply.read())]


@pytest.mark.slow
async def test_system_shm_sweep_registers_its_regions_and_leaves_nothing(identity_server, identity_info):
    target = Target(identity_server.http_url, "identity")
    load = quick_load(concurrency=[2, 4], transport="system_shm", stability_percent=50)
    events = Events()
    task = asyncio.create_task(run_sweep(TritonApi(target, identity_info), load, events.append, asyncio.Event()))
    seen: set[str] = set()
    while not task.done():  # while the sweep runs: our input and output regions are registered
        seen |= {n for n in await asyncio.to_thread(_registered, identity_server.http_url) if n.startswith(segment_prefix())}
        await asyncio.sleep(0.05)
    results = task.result()
    assert [r.status for r in results] != [] and all(r.status in ("stable", "unstable") for r in results)
    assert all(r.errors == 0 and r.requests > 0 for r in results), [r.error_messages for r in results]
    assert sorted(n.rsplit("-", 1)[1] for n in seen) == ["in", "out"]
    assert not [n for n in _registered(identity_server.http_url) if n.startswith(segment_prefix())]
    assert _our_segments() == []


def test_a_request_names_its_region_instead_of_carrying_the_tensor(identity_server, identity_info):
    from engine.net.http1 import parse_endpoint
    from engine.triton.request import prepare_request
    from engine.triton.shm import ShmPlan, TensorRef

    target = Target(identity_server.http_url, "identity")
    plan = ShmPlan({"INPUT0": TensorRef("r-in", 128, 64)}, {"OUTPUT0": TensorRef("r-out", 0, 64)})
    raw = prepare_request(target, identity_info, parse_endpoint(target.http_url), 1, shm=plan).raw
    head, body = raw.split(b"\r\n\r\n", 1)
    doc = json.loads(body)
    assert b"application/json" in head and b"Inference-Header-Content-Length" not in head
    assert doc["inputs"][0]["parameters"] == {"shared_memory_region": "r-in", "shared_memory_byte_size": 64, "shared_memory_offset": 128}
    assert doc["outputs"][0]["parameters"]["shared_memory_region"] == "r-out"


@pytest.mark.server
@pytest.mark.slow
def test_sigkill_of_the_tool_leaves_no_segment_and_no_server(tmp_path: Path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "--record", "--output", str(tmp_path), "--no-check",
         "--set", "model.name=identity", "--set", "load.transport=system_shm", "--set", "load.concurrency=2",
         "--set", "load.window_ms=500", "--set", "load.max_windows=100", "--set", "load.stability_percent=0.001"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not _our_segments(proc.pid) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert _our_segments(proc.pid), (proc.poll(), proc.stdout.read1(4000) if proc.poll() is not None else b"")
        guard = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "engine.server.guard"], capture_output=True, text=True).stdout.split()
        server = subprocess.run(["pgrep", "-P", guard[0], "tritonserver"], capture_output=True, text=True).stdout.split()
        assert guard and server
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 30
        while (_our_segments(proc.pid) or Path(f"/proc/{server[0]}").exists()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _our_segments(proc.pid) == []  # the guard removed the tool's segments
        assert not Path(f"/proc/{server[0]}").exists()  # and the server, with its registrations, is gone
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["--set", "server.kind=remote", "--set", "server.url=http://127.0.0.1:9", "--set", "load.transport=system_shm"],
         "load.transport"),
        (["--set", "model.name=identity", "--set", "load.transport=cuda_shm"], "cuda_shm"),
    ],
)
@pytest.mark.server
def test_a_transport_that_cannot_work_here_is_one_line_and_exit_2(tmp_path: Path, overrides: list[str], message: str):
    run = subprocess.run([sys.executable, "-m", "tui.cli", "--record", "--output", str(tmp_path), "--no-check", *overrides],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in run.stderr


def test_the_bare_cuda_ipc_handle_is_taken_out_of_torchs_storage_handle():
    from engine.errors import UserError
    from engine.triton.shm import ipc_mem_handle

    bare = bytes(range(64))
    assert ipc_mem_handle(bare) == bare  # older torch: the handle itself
    assert ipc_mem_handle(bytes([2]) + b"c" + bare) == bare  # torch 2.x: [version]['c'][handle]
    assert ipc_mem_handle(bytes([3]) + b"c" + bare) == bare  # a later version byte, same layout
    with pytest.raises(UserError, match="expandable"):
        ipc_mem_handle(bytes([2]) + b"e" + bytes(80))
    with pytest.raises(UserError, match="unknown CUDA IPC handle layout"):
        ipc_mem_handle(b"\x02x" + bytes(10))


def test_cuda_inputs_live_on_the_first_gpu_of_the_model_only(monkeypatch: pytest.MonkeyPatch):
    """One input region for every worker, on the model's first GPU (why not a copy per GPU:
    docs/results/load_engine_design_notes.md). The GPU copy itself needs CUDA; what is placed
    where is checked with it stubbed out, through the cuda_shm transport's prepare."""
    from engine.triton import shm
    from engine.triton.target import TargetInfo
    from engine.triton.transports import SweepInputs, cuda_shm

    placed: list[tuple[str, int]] = []

    async def fake_cuda_region(regions, name: str, data: bytes, place: shm.CudaPlace) -> int:
        assert place.device_id == place.device  # a server that sees what we see: one numbering
        placed.append((name, place.device))
        regions.cuda.append(name)
        return 128  # the data's offset in the allocation the IPC handle maps

    monkeypatch.setattr(shm, "_cuda_region", fake_cuda_region)
    no_outputs = TargetInfo(model_config={}, inputs=[], outputs=[], max_batch_size=8)
    sweep = SweepInputs(Target("http://127.0.0.1:9", "identity"), no_outputs, 1, "random",
                        ({}, [({"name": "a"}, b"x" * 100), ({"name": "b"}, b"y" * 10)], []), gpus=(2, 3))
    plans: list = []
    monkeypatch.setattr(cuda_shm.CudaShmTransport, "prepared", lambda self, sweep, plan, cleanup: plans.append(plan))
    asyncio.run(cuda_shm.TRANSPORT.prepare(sweep))
    assert [gpu for _name, gpu in placed] == [2]
    (plan,) = plans
    assert plan is not None and set(plan.inputs) == {"a", "b"}
    assert {ref.region for ref in plan.inputs.values()} == {placed[0][0]}  # one region, on GPU 2
    assert (plan.inputs["a"].offset, plan.inputs["b"].offset) == (128, 128 + 128)  # 64-byte aligned after a


def test_the_placement_rule_puts_inputs_on_the_servers_gpu_under_its_own_number():
    """Allocated on the endpoint's GPU as we number it, registered under the server's number:
    a server pinned to our GPU 1 sees it as its GPU 0 (asked for device 1, it died)."""
    from engine.triton.shm import CudaPlace, cuda_place

    assert cuda_place(()) is None  # no GPU instance: no CUDA region
    assert cuda_place((0, 1)) == CudaPlace(0, 0)  # one server over both GPUs: the first, one numbering
    assert cuda_place((2, 3)) == CudaPlace(2, 2)
    assert cuda_place((1,), server_gpu=0) == CudaPlace(1, 0)  # the fleet's server 2, pinned to GPU 1
    assert cuda_place((3,), server_gpu=0) == CudaPlace(3, 0)


def test_each_fleet_endpoint_gets_its_region_on_its_own_gpu(monkeypatch: pytest.MonkeyPatch):
    """A 1x*2 sweep over cuda_shm: endpoint k's inputs on our GPU k, registered as device 0 of
    the server pinned there (the endpoints as the fleet hands them to the load)."""
    from engine.server.supervisor import FleetMember
    from engine.triton import shm
    from engine.triton.api import prepare_each
    from engine.triton.target import TargetInfo
    from engine.triton.target_setup import fleet_endpoints
    from engine.triton.transports import SweepInputs, cuda_shm

    placed: list[tuple[str, shm.CudaPlace]] = []

    async def fake_cuda_region(regions, name: str, data: bytes, place: shm.CudaPlace) -> int:
        placed.append((regions.url, place))
        regions.cuda.append(name)
        return 0

    monkeypatch.setattr(shm, "_cuda_region", fake_cuda_region)
    monkeypatch.setattr(cuda_shm.CudaShmTransport, "prepared", lambda self, sweep, plan, cleanup: plan)
    members = [FleetMember("http://127.0.0.1:9", None, "127.0.0.1:10", 0),
               FleetMember("http://127.0.0.1:19", None, "127.0.0.1:20", 1)]
    endpoints = fleet_endpoints(members)
    target = Target("http://127.0.0.1:9", "identity", endpoints=endpoints)
    info = TargetInfo(model_config={}, inputs=[], outputs=[], max_batch_size=8)
    inputs = SweepInputs(target, info, 1, "random", ({}, [({"name": "a"}, b"x" * 10)], []), gpus=(0,))
    asyncio.run(prepare_each(cuda_shm.TRANSPORT, inputs, endpoints))
    assert placed == [("http://127.0.0.1:9", shm.CudaPlace(0, 0)), ("http://127.0.0.1:19", shm.CudaPlace(1, 0))]


def test_over_cuda_shm_the_outputs_live_on_the_inputs_gpu_too(monkeypatch: pytest.MonkeyPatch):
    """As perf_analyzer's --shared-memory cuda: the server writes each response into CUDA memory
    on the inputs' GPU, registered under its own number, not into a host region."""
    from engine.triton import shm

    placed: list[tuple[str, shm.CudaPlace, int]] = []

    async def fake_cuda_region(regions, name: str, data: bytes, place: shm.CudaPlace) -> int:
        placed.append((name, place, len(data)))
        regions.cuda.append(name)
        return 256

    async def no_system_region(regions, name: str, data: bytes) -> None:
        raise AssertionError(f"a system region {name} over cuda_shm")

    monkeypatch.setattr(shm, "_cuda_region", fake_cuda_region)
    monkeypatch.setattr(shm, "_system_region", no_system_region)
    regions = asyncio.run(shm.open_regions("http://127.0.0.1:9", {}, [("image", b"x" * 100)],
                                           [("embedding", 2048)], shm.CudaPlace(1, 0)))
    assert [(p, size) for _n, p, size in placed] == [(shm.CudaPlace(1, 0), 2048), (shm.CudaPlace(1, 0), 128)]  # inputs padded to 64 bytes
    assert regions.plan is not None and regions.plan.outputs["embedding"].offset == 256
    assert regions.plan.outputs["embedding"].region == placed[0][0] != placed[1][0]
