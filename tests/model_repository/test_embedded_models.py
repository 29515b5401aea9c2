"""The embedded models' answers through the real tritonserver (CPU variants): the ViT's batched
outputs equal the model's own, and the wire model takes the ViT's bytes in one flat dimension."""

import asyncio
import http.client
import json
import socket
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from engine.net.http1 import parse_endpoint
from engine.server.embedded import EmbeddedServer
from engine.server.onnx_export import _load_vit_module
from engine.triton.request import prepare_request, request_shapes
from engine.triton.target import Target, describe_target
from tests.lazy_modules import torch

pytestmark = pytest.mark.server
VIT_ITEM = 3 * 224 * 224


def _infer(url: str, model: str, name: str, data: np.ndarray, output: str) -> np.ndarray:
    header = json.dumps({
        "inputs": [{"name": name, "shape": list(data.shape), "datatype": "FP32",
                    "parameters": {"binary_data_size": data.nbytes}}],
        "outputs": [{"name": output, "parameters": {"binary_data": True}}],
    }).encode()
    request = urllib.request.Request(f"{url}/v2/models/{model}/infer", data=header + data.tobytes(),
                                     headers={"Inference-Header-Content-Length": str(len(header))})
    with urllib.request.urlopen(request, timeout=60) as response:
        body = response.read()
        json_len = int(response.headers["Inference-Header-Content-Length"])
    meta = json.loads(body[:json_len])["outputs"][0]
    dtype = {"FP32": np.float32, "INT32": np.int32}[meta["datatype"]]
    return np.frombuffer(body[json_len:], dtype=dtype).reshape(meta["shape"])


def test_vit_tiny_cpu_serves_the_models_own_outputs_for_concurrent_requests(tmp_path, monkeypatch):
    # with its per-instance timing on (GPUSCALE_VIT_TIMING), which must not change an answer
    monkeypatch.setenv("GPUSCALE_VIT_TIMING", str(tmp_path / "timing"))
    vit = _load_vit_module()
    rng = np.random.default_rng(0)
    batches = [rng.random((k, 3, 224, 224), dtype=np.float32) for k in (1, 2, 3)]
    with EmbeddedServer(model="vit_tiny", variant="cpu", log_dir=tmp_path) as server:
        # concurrent: the dynamic batcher may hand them over together (staged into one batch)
        with ThreadPoolExecutor(len(batches)) as pool:
            outs = list(pool.map(lambda b: _infer(server.http_url, "vit_tiny", "image", b, "embedding"), batches))
    model = vit.build_vit("vit_tiny")
    with torch.inference_mode():
        expected = [model(torch.from_numpy(b)).numpy() for b in batches]
    for got, want in zip(outs, expected, strict=False):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    # the server has stopped: each instance wrote its totals when it was unloaded
    (written,) = [json.loads(p.read_text()) for p in (tmp_path / "timing").glob("vit_tiny-cpu-*.json")]
    assert written["images"] == 6 and written["requests"] == 3 and 1 <= written["batches"] <= 3
    assert {"gap", "inputs", "stage", "run", "sync", "responses"} <= set(written["totals_ns"])
    assert written["totals_ns"]["run"] > 0


def _send(endpoint, raw: bytes) -> tuple[int, bytes, int]:
    with socket.create_connection((endpoint.host, endpoint.port), timeout=30) as sock:
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, response.read(), int(response.headers.get("Inference-Header-Content-Length", 0))


def test_wire_model_takes_the_vits_bytes_through_the_load_engines_request(tmp_path):
    with EmbeddedServer(model="wire", variant="auto", log_dir=tmp_path) as server:
        assert server.variant == "cpu"
        target = Target(server.http_url, "wire", input_shapes={"INPUT0": [VIT_ITEM]})
        info = asyncio.run(describe_target(target))
        assert info.inputs[0]["shape"] == [-1, -1]  # variable: the load's input_shapes decide
        assert request_shapes(target, info, 3) == ({"INPUT0": [3, VIT_ITEM]}, [])
        endpoint = parse_endpoint(server.http_url)
        prepared = prepare_request(target, info, endpoint, 3)
        assert prepared.body_bytes > 3 * VIT_ITEM * 4
        status, body, json_len = _send(endpoint, prepared.raw)
        assert status == 200, body[:200]
        counts = np.frombuffer(body[json_len:], dtype=np.int32)
        assert counts.tolist() == [VIT_ITEM] * 3  # 4 bytes per item, and the whole payload arrived
        # any other flat size, e.g. identity's 16 values
        small = _infer(server.http_url, "wire", "INPUT0", np.zeros((2, 16), np.float32), "OUTPUT0")
        assert small.tolist() == [[16], [16]]
