"""load.input_data against the real embedded Triton (the identity model echoes INPUT0 as OUTPUT0):
several entries sent in turn by each transport, validation_data equal to the inputs passes, a
wrong expected value is counted as wrong_answer naming its entry; and the pure parts of cycling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.net.connection import RequestCycle, first_request
from engine.triton.answer_check import AnswerCheck, AnswerSpec
from engine.triton.answer_values import Expected, compare_output
from engine.triton.target import Target
from tests.engine.load.conftest import quick_load, sweep

ENTRIES = 5


def _data_file(tmp_path: Path, wrong_entry: int | None = None) -> str:
    """ENTRIES entries of the identity model's 16 floats, each its own values, with validation
    data equal to the inputs (the identity's answer), except ``wrong_entry``'s first value."""
    data = [{"INPUT0": [k + i / 16 for i in range(16)]} for k in range(ENTRIES)]
    expected = [{"OUTPUT0": list(entry["INPUT0"])} for entry in data]
    if wrong_entry is not None:
        expected[wrong_entry]["OUTPUT0"][0] += 1.0
    path = tmp_path / "data.json"
    path.write_text(json.dumps({"data": data, "validation_data": expected}))
    return str(path)


def test_workers_start_far_apart_and_cycle_every_request():
    assert first_request(0, 10) == 0 and len({first_request(w, 10) for w in range(4)}) == 4
    assert all(first_request(w, 1) == 0 for w in range(8))
    cycle = RequestCycle(3, 0)
    assert [cycle.take() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_values_are_compared_exactly_or_within_the_tolerance():
    import numpy as np

    want = Expected("FP32", np.array([1.0, 2.0], "<f4").tobytes())
    assert compare_output("o", want, np.array([1.0, 2.0 + 1e-6], "<f4").tobytes(), 1e-5) is None
    assert "element 1: expected 2, got 2.1" in compare_output("o", want, np.array([1.0, 2.1], "<f4").tobytes(), 1e-5)
    ints = Expected("INT64", np.array([5, 6], "<i8").tobytes())
    assert "element 1: expected 6, got 7" in compare_output("o", ints, np.array([5, 7], "<i8").tobytes(), 1.0)
    text = Expected("BYTES", b"\x02\x00\x00\x00ok")
    assert "element 0: expected b'ok', got b'no'" in compare_output("o", text, b"\x02\x00\x00\x00no", 0.0)


def test_without_validation_data_the_answer_check_compares_nothing():
    assert AnswerCheck(AnswerSpec({"OUTPUT0": "FP32"})).validate is False


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["http", "system_shm", "grpc"])
async def test_entries_are_sent_in_turn_and_their_answers_pass(identity_server, identity_info, tmp_path, transport):
    target = Target(identity_server.http_url, "identity")
    load = quick_load(concurrency=[3], transport=transport, input_data=_data_file(tmp_path), stability_percent=50)
    results, events = await sweep(target, identity_info, load)
    (used,) = events.of("input_data")
    assert (used.entries, used.requests, used.validated, used.source) == (ENTRIES, ENTRIES, True, "json")
    assert results and all(r.errors == 0 and r.requests > 0 for r in results), [r.error_messages for r in results]


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["http", "system_shm", "grpc"])
async def test_a_wrong_expected_value_is_a_wrong_answer_naming_its_entry(identity_server, identity_info, tmp_path,
                                                                          transport):
    target = Target(identity_server.http_url, "identity")
    load = quick_load(concurrency=[2], transport=transport, input_data=_data_file(tmp_path, wrong_entry=3),
                      max_windows=3, stability_percent=50)
    results, events = await sweep(target, identity_info, load)
    (level,) = results
    assert level.status == "failed" and level.errors_by_kind.get("wrong_answer", 0) > 0, level.errors_by_kind
    assert set(level.errors_by_kind) == {"wrong_answer"}  # the other four entries' answers passed
    message = " | ".join(level.error_messages)
    assert "entry 3: output 'OUTPUT0' element 0: expected 4, got 3" in message, message
    assert any("wrong" in e.message for e in events.of("error"))


@pytest.mark.slow
async def test_a_batch_joins_consecutive_entries_and_their_expected_outputs(identity_server, identity_info, tmp_path):
    target = Target(identity_server.http_url, "identity")
    load = quick_load(concurrency=[2], batch_size=2, input_data=_data_file(tmp_path), stability_percent=50)
    results, events = await sweep(target, identity_info, load)
    (used,) = events.of("input_data")
    assert used.requests == ENTRIES  # 5 entries in batches of 2: perf_analyzer's 5 distinct requests
    assert results and all(r.errors == 0 and r.requests > 0 for r in results), [r.error_messages for r in results]


async def test_bad_data_stops_the_sweep_before_any_load(identity_server, identity_info, tmp_path):
    from engine.errors import UserError

    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"data": [{"INPUT0": [1.0] * 15}]}))
    target = Target(identity_server.http_url, "identity")
    with pytest.raises(UserError, match="input 'INPUT0': 15 elements where shape \\[16\\] holds 16"):
        await sweep(target, identity_info, quick_load(input_data=str(path)))


def test_shared_memory_places_every_requests_inputs_in_one_region(monkeypatch: pytest.MonkeyPatch):
    """Every request's tensors one after the other in the input region, 64-byte aligned, each
    request naming its own; with validation data the outputs stay in the answers. The GPU copy
    is stubbed out (CUDA), as test_shm_transport's placement test does."""
    import asyncio

    from engine.triton import shm
    from engine.triton.target import TargetInfo
    from engine.triton.transports import RequestInputs, SweepInputs, cuda_shm

    blobs: list[bytes] = []

    async def fake_cuda_region(regions, name: str, data: bytes, gpu: int) -> int:
        blobs.append(data)
        regions.cuda.append(name)
        return 0

    monkeypatch.setattr(shm, "_cuda_region", fake_cuda_region)
    info = TargetInfo(model_config={}, inputs=[], outputs=[{"name": "o", "datatype": "FP32", "shape": [-1, 1]}],
                      max_batch_size=8)
    requests = [RequestInputs({}, [({"name": "a"}, bytes([k]) * 100), ({"name": "b"}, bytes([10 + k]) * 10)],
                              {"o": Expected("FP32", b"\0" * 4)}, f"entry {k}") for k in range(3)]
    sweep_inputs = SweepInputs(Target("http://127.0.0.1:9", "m"), info, 1, "random", ({}, [], []), gpus=(0,),
                               requests=requests)
    plans: list = []
    monkeypatch.setattr(cuda_shm.CudaShmTransport, "prepared", lambda self, sweep, plan, cleanup: plans.append(plan))
    asyncio.run(cuda_shm.TRANSPORT.prepare(sweep_inputs))
    (plan,) = plans
    (blob,) = blobs
    assert plan.outputs == {}  # validation data: the outputs come back in each answer
    assert [(plan.request_inputs(k)["a"].offset, plan.request_inputs(k)["b"].offset) for k in range(3)] == [
        (0, 128), (192, 320), (384, 512)]
    for k in range(3):
        a, b = plan.request_inputs(k)["a"], plan.request_inputs(k)["b"]
        assert blob[a.offset : a.offset + a.byte_size] == bytes([k]) * 100
        assert blob[b.offset : b.offset + b.byte_size] == bytes([10 + k]) * 10
