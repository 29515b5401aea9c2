"""Building the pre-encoded inference request for any model the metadata describes (pure)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.errors import UserError
from engine.net.http1 import parse_endpoint
from engine.triton.request import prepare_request, tensor_bytes
from engine.triton.target import Target, TargetInfo

ENDPOINT = parse_endpoint("http://127.0.0.1:8000")


def _info(inputs, max_batch=64, outputs=({"name": "OUT", "datatype": "FP32", "shape": [-1, 4]},)):
    return TargetInfo(model_config={}, inputs=list(inputs), outputs=list(outputs), max_batch_size=max_batch)


def _split(raw: bytes):
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    json_len = int(headers["Inference-Header-Content-Length"])
    return lines[0], headers, json.loads(body[:json_len]), body[json_len:]


def test_identity_request_is_binary_and_self_consistent():
    info = _info([{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 16]}])
    req = prepare_request(Target("http://127.0.0.1:8000", "identity", headers={"Authorization": "x"}), info, ENDPOINT, 4)
    line, headers, header, blob = _split(req.raw)
    assert line == "POST /v2/models/identity/infer HTTP/1.1"
    assert headers["Authorization"] == "x"
    assert headers["Content-Type"] == "application/octet-stream"
    assert int(headers["Content-Length"]) == req.body_bytes == int(headers["Inference-Header-Content-Length"]) + len(blob)
    assert header["inputs"] == [
        {"name": "INPUT0", "shape": [4, 16], "datatype": "FP32", "parameters": {"binary_data_size": 4 * 16 * 4}}
    ]
    assert header["outputs"] == [{"name": "OUT", "parameters": {"binary_data": True}}]
    values = np.frombuffer(blob, "<f4")
    assert values.size == 64 and 0 <= values.min() and values.max() < 1 and values.std() > 0
    assert req.shapes == {"INPUT0": [4, 16]} and req.warnings == []


def test_versioned_path_and_zeros():
    info = _info([{"name": "x", "datatype": "INT64", "shape": [-1, 3]}])
    req = prepare_request(Target("http://h", "m", model_version="2"), info, ENDPOINT, 1, data="zeros")
    line, _, _, blob = _split(req.raw)
    assert line == "POST /v2/models/m/versions/2/infer HTTP/1.1"
    assert blob == b"\x00" * 24


def test_model_without_batching_sends_its_shape_as_is():
    info = _info([{"name": "x", "datatype": "FP16", "shape": [3, 2]}], max_batch=0)
    req = prepare_request(Target("http://h", "m"), info, ENDPOINT, 1)
    assert req.shapes == {"x": [3, 2]}
    with pytest.raises(UserError, match="does not batch"):
        prepare_request(Target("http://h", "m"), info, ENDPOINT, 2)


def test_batch_beyond_max_batch_size_is_a_user_error():
    info = _info([{"name": "x", "datatype": "FP32", "shape": [-1, 2]}], max_batch=8)
    with pytest.raises(UserError, match="exceeds model 'm''s max_batch_size \\(8\\)"):
        prepare_request(Target("http://h", "m"), info, ENDPOINT, 9)


def test_variable_dims_get_1_with_a_warning_or_the_given_shape():
    info = _info([{"name": "ids", "datatype": "INT32", "shape": [-1, -1]}])
    req = prepare_request(Target("http://h", "m"), info, ENDPOINT, 2)
    assert req.shapes == {"ids": [2, 1]}
    assert len(req.warnings) == 1 and "ids" in req.warnings[0]
    req = prepare_request(Target("http://h", "m", input_shapes={"ids": [7]}), info, ENDPOINT, 2)
    assert req.shapes == {"ids": [2, 7]} and req.warnings == []
    with pytest.raises(UserError, match="input_shapes names nope"):
        prepare_request(Target("http://h", "m", input_shapes={"nope": [1]}), info, ENDPOINT, 1)


def test_tensor_bytes_for_every_datatype():
    rng = np.random.default_rng(0)
    sizes = {"BOOL": 1, "UINT8": 1, "INT8": 1, "INT16": 2, "UINT16": 2, "INT32": 4, "UINT32": 4, "INT64": 8,
             "UINT64": 8, "FP16": 2, "BF16": 2, "FP32": 4, "FP64": 8}
    for dtype, size in sizes.items():
        assert len(tensor_bytes(dtype, [2, 3], "random", rng)) == 6 * size, dtype
        assert tensor_bytes(dtype, [2, 3], "zeros", rng) == b"\x00" * 6 * size, dtype
    blob = tensor_bytes("BYTES", [2], "random", rng)
    assert len(blob) == 2 * (4 + 8) and int.from_bytes(blob[:4], "little") == 8
    assert tensor_bytes("BYTES", [2], "zeros", rng) == b"\x01\x00\x00\x000" * 2
    with pytest.raises(UserError, match="not supported"):
        tensor_bytes("FP8", [1], "random", rng)
