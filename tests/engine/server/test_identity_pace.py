"""The suite's identity servers are paced (tests/conftest.py): each execute of the model sleeps
GPUSCALE_IDENTITY_PACE_MS, so that sweeps against it cost a fraction of the CPU. The unpaced
server runs the model at full speed, for tests that need the client to be the limit."""

from __future__ import annotations

import json
import urllib.request

import psutil

from tests.conftest import IDENTITY_PACE


def _stub_environments(srv) -> list[dict[str, str]]:
    stubs = [p for p in psutil.Process(srv.pid).children(recursive=True) if "triton_python_backend_stub" in p.name()]
    assert stubs, "the server has no Python-backend stub"
    return [p.environ() for p in stubs]


def _infer_ns_per_execution(url: str, requests: int) -> float:
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [0.5] * 16}]}).encode()
    for _ in range(requests):
        with urllib.request.urlopen(urllib.request.Request(f"{url}/v2/models/identity/infer", data=body), timeout=60) as reply:
            assert json.loads(reply.read())["outputs"][0]["data"] == [0.5] * 16
    with urllib.request.urlopen(f"{url}/v2/models/identity/stats", timeout=60) as reply:
        stats = json.loads(reply.read())["model_stats"][0]
    return int(stats["inference_stats"]["compute_infer"]["ns"]) / int(stats["execution_count"])


def test_the_suites_identity_server_sleeps_in_each_execute(identity_server) -> None:
    assert [env.get(IDENTITY_PACE) for env in _stub_environments(identity_server)] == ["2"]
    # a lower bound: a paced execute cannot end sooner, however idle or busy the box
    assert _infer_ns_per_execution(identity_server.http_url, 3) >= 2e6


def test_the_unpaced_server_runs_the_model_without_the_pace(unpaced_identity_server) -> None:
    assert all(IDENTITY_PACE not in env for env in _stub_environments(unpaced_identity_server))
    _infer_ns_per_execution(unpaced_identity_server.http_url, 1)  # it answers, with its input
