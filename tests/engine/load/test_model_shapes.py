"""Every model shape a Triton user has, served by the load engine against the real embedded server
(tests/conftest.py's shapes_server): several inputs of different datatypes (BYTES, FP16, BF16,
UINT8, INT64), a variable dimension, max_batch_size 0, an optional input, an ensemble and a BLS
model. `mixed` takes any values, so random and zero data pass on every transport; the datacheck
models refuse them (errors counted, the level and the run fail) and answer real data, which the
engine's own request encoding carries (tests/data/datacheck_input.json)."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import socket
from pathlib import Path

import numpy as np
import pytest

from engine.net.http1 import Endpoint, parse_endpoint
from engine.profiles import load_profile
from engine.session import Session, SessionOptions
from engine.triton.answer_check import AnswerCheck, AnswerSpec
from engine.triton.request import (
    NUMPY_DTYPES,
    output_sizes,
    prepare_request,
    request_inputs,
    request_shapes,
    tensor_bytes,
)
from engine.triton.shm import SHM_ROOT, open_regions
from engine.triton.target import Target, TargetInfo, describe_target
from tests.engine.load.conftest import quick_load, sweep

pytestmark = [pytest.mark.server, pytest.mark.slow]
DATA_FILE = Path(__file__).resolve().parents[2] / "data" / "datacheck_input.json"
DATACHECK = ("datacheck", "datacheck_nobatch", "datacheck_ensemble", "datacheck_bls")
SHAPES = {"mixed": {"IDS": [5]}, "mixed_nobatch": {"IDS": [5]}}


def _describe(url: str, model: str, input_shapes: dict[str, list[int]] | None = None) -> tuple[Target, TargetInfo]:
    shapes = SHAPES.get(model, {"TOKENS": [8]}) if input_shapes is None else input_shapes
    target = Target(url, model, input_shapes=dict(shapes))
    return target, asyncio.run(describe_target(target))


def _send(endpoint: Endpoint, raw: bytes) -> tuple[int, bytes, int | None]:
    with socket.create_connection((endpoint.host, endpoint.port), timeout=30) as sock:
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock)
        response.begin()
        ihl = response.headers.get("Inference-Header-Content-Length")
        return response.status, response.read(), None if ihl is None else int(ihl)


def _outputs(body: bytes, ihl: int | None) -> dict[str, tuple[str, list[int], bytes]]:
    """Each output of an answer carried in its body: (datatype, shape, raw bytes)."""
    header = json.loads(body[: ihl if ihl is not None else len(body)])
    out, at = {}, ihl or 0
    for o in header["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is None:
            continue  # placed in shared memory
        out[o["name"]] = (o["datatype"], o["shape"], body[at : at + size])
        at += size
    return out


def _strings(raw: bytes) -> list[bytes]:
    """Binary BYTES contents: 4-byte little-endian length, then the element, for each."""
    items, at = [], 0
    while at < len(raw):
        n = int.from_bytes(raw[at : at + 4], "little")
        items.append(raw[at + 4 : at + 4 + n])
        at += 4 + n
    return items


def _entry_inputs(info: TargetInfo, entry: dict, leave_out: tuple[str, ...] = ()):
    """One entry of a perf_analyzer input-data file as request_inputs' answer (batch of one): a
    `content` list in the input's datatype, or `b64` as the raw tensor bytes (for BYTES, already
    length-prefixed, as perf_analyzer takes it)."""
    shapes, tensors = {}, []
    for tensor in info.inputs:
        name = tensor["name"]
        if name in leave_out:
            continue
        value = entry[name]
        if isinstance(value, dict) and "b64" in value:
            raw = base64.b64decode(value["b64"])
            dims = value.get("shape") or [1]
        else:
            content = value["content"] if isinstance(value, dict) else value
            raw = np.asarray(content, NUMPY_DTYPES[tensor["datatype"]]).tobytes()
            dims = value.get("shape", [len(content)]) if isinstance(value, dict) else [len(content)]
        shapes[name] = ([1] if info.max_batch_size > 0 else []) + list(dims)
        tensors.append((tensor, raw))
    return shapes, tensors, []


# ----------------------------------------------------------------------------- what the engine asks


def test_each_models_metadata_gives_the_requests_shapes(shapes_server):
    url = shapes_server.http_url
    target, info = _describe(url, "mixed")
    assert {t["name"]: t["datatype"] for t in info.inputs} == {
        "IDS": "INT64", "TEXT": "BYTES", "HALF": "FP16", "BRAIN": "BF16", "PIXELS": "UINT8", "EXTRA": "FP32"}
    # the optional input is sent too, as perf_analyzer sends every input
    assert request_shapes(target, info, 3) == ({"IDS": [3, 5], "TEXT": [3, 1], "HALF": [3, 4], "BRAIN": [3, 2, 2],
                                                "PIXELS": [3, 3], "EXTRA": [3, 2]}, [])
    target, info = _describe(url, "mixed_nobatch")
    assert info.max_batch_size == 0
    assert request_shapes(target, info, 1)[0]["BRAIN"] == [2, 2]  # no batch dimension
    # without input_shapes a variable dimension is sent as 1, and the warning says how to choose
    target, info = _describe(url, "datacheck", {})
    shapes, warnings = request_shapes(target, info, 2)
    assert shapes["TOKENS"] == [2, 1] and len(warnings) == 1 and "input_shapes" in warnings[0]
    # the ensemble's and the BLS model's own metadata drive their requests: datacheck's inputs
    for model, outputs in (("datacheck_ensemble", ["SCORE", "LABEL"]), ("datacheck_bls", ["TOKEN_COUNT", "SCORE"])):
        target, info = _describe(url, model)
        assert [t["name"] for t in info.inputs] == ["TOKENS", "IMAGE", "SCALE"]
        assert [t["name"] for t in info.outputs] == outputs and info.max_batch_size == 8
        assert request_shapes(target, info, 2)[0] == {"TOKENS": [2, 8], "IMAGE": [2, 1], "SCALE": [2, 1]}


@pytest.mark.parametrize("model", ["mixed", "mixed_nobatch"])
@pytest.mark.parametrize("data", ["random", "zeros"])
def test_every_datatype_arrives_as_sent(shapes_server, model, data):
    """The echoes equal the bytes the engine sent, BF16 and BYTES included, and the optional
    input was sent; the answer passes the engine's answer check (variable and BYTES outputs)."""
    target, info = _describe(shapes_server.http_url, model)
    batch = 1 if info.max_batch_size == 0 else 3
    inputs = request_inputs(target, info, batch, data, seed=7)
    endpoint = parse_endpoint(shapes_server.http_url)
    status, body, ihl = _send(endpoint, prepare_request(target, info, endpoint, batch, inputs=inputs).raw)
    assert status == 200, body[:300]
    spec = AnswerSpec({o["name"]: o["datatype"] for o in info.outputs})
    assert AnswerCheck(spec).check(bytearray(body), 0, len(body), ihl) is None
    sent = {t["name"]: blob for t, blob in inputs[1]}
    got = _outputs(body, ihl)
    for name in ("IDS", "TEXT", "HALF", "BRAIN"):
        datatype, shape, raw = got[f"{name}_OUT"]
        assert shape == inputs[0][name] and raw == sent[name], name
    assert got["BRAIN_OUT"][0] == "BF16"
    if data == "random":
        assert len(set(_strings(sent["TEXT"]))) > 1 or batch == 1  # random BYTES elements differ
    assert got["EXTRA_SENT"][2] == b"\x01" * (batch if info.max_batch_size else 1)


def test_system_shared_memory_holds_each_input_where_the_request_says(shapes_server):
    """Several inputs of odd sizes in one region, each at its aligned offset: the server reads
    each one there (the echoes in the body and in the output region equal what was sent)."""
    target, info = _describe(shapes_server.http_url, "mixed")
    inputs = request_inputs(target, info, 3, "random", seed=3)
    sent = {t["name"]: blob for t, blob in inputs[1]}
    endpoint = parse_endpoint(shapes_server.http_url)

    async def one_request():
        regions = await open_regions(target.http_url, {}, list(sent.items()), output_sizes(info, 3))
        try:
            assert regions.plan is not None
            raw = prepare_request(target, info, endpoint, 3, shm=regions.plan, inputs=inputs).raw
            status, body, ihl = await asyncio.to_thread(_send, endpoint, raw)
            placed = {}
            for name, ref in regions.plan.outputs.items():
                with open(f"{SHM_ROOT}/{ref.region}", "rb") as segment:
                    segment.seek(ref.offset)
                    placed[name] = segment.read(ref.byte_size)
            return status, body, ihl, placed
        finally:
            await regions.close()

    status, body, ihl, placed = asyncio.run(one_request())
    assert status == 200, body[:300]
    in_body = _outputs(body, ihl)
    assert set(in_body) == {"IDS_OUT", "TEXT_OUT"}  # a variable dimension and BYTES: sizes unknown ahead
    assert in_body["IDS_OUT"][2] == sent["IDS"] and in_body["TEXT_OUT"][2] == sent["TEXT"]
    assert placed["HALF_OUT"] == sent["HALF"] and placed["BRAIN_OUT"] == sent["BRAIN"]
    assert placed["EXTRA_SENT"] == b"\x01" * 3


@pytest.mark.parametrize("transport", ["http", "grpc", "system_shm"])
def test_a_sweep_of_every_datatype_over_each_transport_has_no_errors(shapes_server, transport):
    target, info = _describe(shapes_server.http_url, "mixed")
    results, events = asyncio.run(sweep(target, info, quick_load(batch_size=2, transport=transport)))
    (level,) = results
    assert level.errors == 0 and level.requests > 0, (level.status, level.errors_by_kind, level.error_messages)
    assert level.status != "failed"


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_a_sweep_of_a_model_without_batching_has_no_errors(shapes_server, transport):
    target, info = _describe(shapes_server.http_url, "mixed_nobatch")
    results, _ = asyncio.run(sweep(target, info, quick_load(data="zeros", transport=transport)))
    (level,) = results
    assert level.errors == 0 and level.requests > 0 and level.status != "failed"


# ----------------------------------------------------------------------------- datacheck: only real data


@pytest.mark.parametrize("model", DATACHECK)
def test_datacheck_models_refuse_the_engines_random_data(shapes_server, model):
    target, info = _describe(shapes_server.http_url, model)
    batch = 1 if info.max_batch_size == 0 else 2
    results, _ = asyncio.run(sweep(target, info, quick_load(batch_size=batch, max_windows=3)))
    (level,) = results
    assert level.status == "failed" and level.requests == 0 and level.errors > 0
    assert set(level.errors_by_kind) == {"rejected"}, level.errors_by_kind
    assert any("not 101 ([CLS]): not token ids" in m for m in level.error_messages), level.error_messages


def test_datacheck_names_what_is_wrong_with_each_input(shapes_server):
    target, info = _describe(shapes_server.http_url, "datacheck", {"TOKENS": [4]})
    entry = json.loads(DATA_FILE.read_text())["data"][0]
    endpoint = parse_endpoint(shapes_server.http_url)

    def refusal(change: dict) -> str:
        inputs = _entry_inputs(info, {**entry, **change})
        status, body, _ = _send(endpoint, prepare_request(target, info, endpoint, 1, inputs=inputs).raw)
        assert status == 400, body[:200]
        return json.loads(body)["error"]

    big = {"TOKENS": {"content": [101, 7592, 30522, 102], "shape": [4]}}
    assert refusal(big) == "TOKENS row 0 holds id 30522, outside the vocabulary [0, 30522)"
    png = base64.b64encode(len(b"\x89PNG").to_bytes(4, "little") + b"\x89PNG").decode()
    assert refusal({"IMAGE": {"b64": png}}) == "IMAGE row 0 starts with 89 50 4e, not ff d8 ff: not a JPEG"
    # the engine's random BYTES (ASCII digits) beside real token ids
    digits = base64.b64encode(tensor_bytes("BYTES", [1, 1], "random", np.random.default_rng(1))).decode()
    assert refusal({"IMAGE": {"b64": digits}}).endswith(", not ff d8 ff: not a JPEG")


@pytest.mark.parametrize("model", DATACHECK)
@pytest.mark.parametrize("scale", ["sent", "left out"])
def test_datacheck_models_answer_real_data_as_the_file_expects(shapes_server, model, scale):
    """Each entry of the data file, carried by the engine's own request encoding, is answered
    with the file's validation_data (SCALE left out: the model's default 1.0)."""
    document = json.loads(DATA_FILE.read_text())
    endpoint = parse_endpoint(shapes_server.http_url)
    for entry, expected in zip(document["data"], document["validation_data"], strict=True):
        tokens = entry["TOKENS"]["content"]
        target, info = _describe(shapes_server.http_url, model, {"TOKENS": [len(tokens)]})
        inputs = _entry_inputs(info, entry, () if scale == "sent" else ("SCALE",))
        status, body, ihl = _send(endpoint, prepare_request(target, info, endpoint, 1, inputs=inputs).raw)
        assert status == 200, body[:300]
        spec = AnswerSpec({o["name"]: o["datatype"] for o in info.outputs})
        assert AnswerCheck(spec).check(bytearray(body), 0, len(body), ihl) is None
        got = _outputs(body, ihl)
        want_score = expected["SCORE"][0] if scale == "sent" else (sum(tokens) % 1000) / 1000
        assert np.frombuffer(got["SCORE"][2], np.float32)[0] == pytest.approx(want_score, rel=1e-6)
        if "TOKEN_COUNT" in got:
            assert np.frombuffer(got["TOKEN_COUNT"][2], np.int64).tolist() == expected["TOKEN_COUNT"]
        if "IMAGE_BYTES" in got:
            assert np.frombuffer(got["IMAGE_BYTES"][2], np.int64).tolist() == expected["IMAGE_BYTES"]
        if "LABEL" in got:  # the ensemble's second step
            want = f"{expected['TOKEN_COUNT'][0]} tokens, {expected['IMAGE_BYTES'][0]} bytes".encode()
            assert _strings(got["LABEL"][2]) == [want]


def test_a_run_on_datacheck_with_random_data_fails(shapes_server, tmp_path):
    profile = load_profile("local", [
        "server.kind=remote", f"server.url={shapes_server.http_url}", "model.name=datacheck",
        "load.input_shapes={TOKENS=[8]}", "load.concurrency=2", "load.window_ms=300", "load.warmup_s=0.2",
        "load.max_windows=3", "load.min_window_requests=20", "load.workers=1"])
    session = Session(profile, SessionOptions(record_dir=tmp_path, check=False, gpu_count=0))
    session.start()
    assert session.join(120)
    assert session.exit_code == 1, (session.exit_code, session.error)
    assert session.error is not None and session.error.startswith("1 of 1 levels failed (level ")
    (level,) = session.level_results
    assert level.errors > 0 and level.requests == 0
