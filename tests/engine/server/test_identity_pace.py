"""The suite's servers are paced (tests/conftest.py): each execute of its small models (identity,
accumulator, datacheck, mixed) sleeps GPUSCALE_MODEL_PACE_MS, so that sweeps against them cost a
fraction of the CPU. The unpaced server runs the model at full speed, for tests that need the
client to be the limit."""

from __future__ import annotations

import json
import urllib.request

import psutil

from bench.common import model_stats
from tests.conftest import MODEL_PACE, SUITE_PACE_MS


def _stub_environments(srv) -> list[dict[str, str]]:
    stubs = [p for p in psutil.Process(srv.pid).children(recursive=True) if "triton_python_backend_stub" in p.name()]
    assert stubs, "the server has no Python-backend stub"
    return [p.environ() for p in stubs]


def _compute_ns_per_execution(url: str, model: str) -> float:
    stats = model_stats(url, model)
    return stats["compute_infer_ns"] / stats["executions"]


def _infer_ns_per_execution(url: str, requests: int) -> float:
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [0.5] * 16}]}).encode()
    for _ in range(requests):
        with urllib.request.urlopen(urllib.request.Request(f"{url}/v2/models/identity/infer", data=body), timeout=60) as reply:
            assert json.loads(reply.read())["outputs"][0]["data"] == [0.5] * 16
    return _compute_ns_per_execution(url, "identity")


def test_the_suites_identity_server_sleeps_in_each_execute(identity_server) -> None:
    assert [float(env[MODEL_PACE]) for env in _stub_environments(identity_server)] == [SUITE_PACE_MS]
    # a lower bound: a paced execute cannot end sooner, however idle or busy the box
    assert _infer_ns_per_execution(identity_server.http_url, 3) >= SUITE_PACE_MS * 1e6


def test_the_unpaced_server_runs_the_model_without_the_pace(unpaced_identity_server) -> None:
    assert all(MODEL_PACE not in env for env in _stub_environments(unpaced_identity_server))
    _infer_ns_per_execution(unpaced_identity_server.http_url, 1)  # it answers, with its input


def test_the_suites_shape_models_sleep_in_each_execute(shapes_server) -> None:
    import numpy as np
    import tritonclient.http as http

    assert {float(env[MODEL_PACE]) for env in _stub_environments(shapes_server)} == {SUITE_PACE_MS}
    client = http.InferenceServerClient(shapes_server.http_url.removeprefix("http://"))
    tokens = http.InferInput("TOKENS", [3], "INT64")
    tokens.set_data_from_numpy(np.array([101, 7, 9], dtype=np.int64))
    image = http.InferInput("IMAGE", [1], "BYTES")
    image.set_data_from_numpy(np.array([b"\xff\xd8\xff\xe0 a jpeg"], dtype=np.object_))
    answer = client.infer("datacheck_nobatch", [tokens, image])
    assert answer.as_numpy("TOKEN_COUNT").tolist() == [3]  # checked, and answered
    assert _compute_ns_per_execution(shapes_server.http_url, "datacheck_nobatch") >= SUITE_PACE_MS * 1e6
