"""Several endpoints, pure parts: the split of a level over them, the endpoint list, the configs check."""

from __future__ import annotations

import pytest

from engine.errors import UserError
from engine.load.spread import connections_per_worker, per_endpoint, workers_multiple
from engine.triton.endpoints import config_mismatch, endpoints_from
from engine.triton.server_stats import StatsSnapshot, breakdown, summed
from engine.triton.target import Endpoint, Target


@pytest.mark.parametrize("endpoints", [1, 2, 3, 4])
@pytest.mark.parametrize("each", [1, 2, 3])
@pytest.mark.parametrize("total", [0, 1, 2, 3, 5, 7, 8, 31, 33, 64, 127])
def test_connections_spread_within_one_of_an_even_share(total: int, endpoints: int, each: int) -> None:
    workers = endpoints * each
    slots = connections_per_worker(total, endpoints, workers)
    assert sum(slots) == total and len(slots) == workers
    shares = per_endpoint(slots, endpoints)
    assert max(shares) - min(shares) <= 1
    assert all(abs(s - total / endpoints) < 1 for s in shares)
    for e in range(endpoints):  # and evenly over each endpoint's workers
        mine = slots[e::endpoints]
        assert max(mine) - min(mine) <= 1


def test_workers_rounded_to_a_multiple_of_the_endpoints() -> None:
    assert workers_multiple(1, 2) == 2
    assert workers_multiple(3, 2) == 4
    assert workers_multiple(4, 2) == 4
    assert workers_multiple(5, 2, most=4) == 4
    assert workers_multiple(1, 1) == 1
    with pytest.raises(ValueError):
        connections_per_worker(4, 2, 3)


def test_endpoints_named_in_order_with_their_metrics() -> None:
    eps = endpoints_from(["http://a:8000", "http://b:8000"], ["http://a:8002/metrics", "http://b:8002/metrics"])
    assert eps == [Endpoint("ep1", "http://a:8000", "http://a:8002/metrics"),
                   Endpoint("ep2", "http://b:8000", "http://b:8002/metrics")]
    target = Target("http://a:8000", "m", endpoints=eps)
    assert target.at(eps[1]).http_url == "http://b:8000" and target.at(eps[1]).endpoints == []
    assert Target("http://a:8000", "m").endpoint_list() == [Endpoint("", "http://a:8000")]


def test_duplicate_endpoint_is_named() -> None:
    with pytest.raises(UserError, match=r"endpoint ep3 \(http://A:8000/\) duplicates ep1"):
        endpoints_from(["http://a:8000", "http://b:8000", "http://A:8000/"])
    with pytest.raises(UserError, match="one of the metrics URLs per server URL"):
        endpoints_from(["http://a:8000", "http://b:8000"], ["http://a:8002/metrics"])


def test_config_mismatch_names_the_key_and_each_endpoint() -> None:
    eps = endpoints_from(["http://a:1", "http://b:1"])
    same = {"name": "m", "max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 100}}
    assert config_mismatch(eps, [same, {**same, "name": "m2"}]) is None
    other = {**same, "dynamic_batching": {"max_queue_delay_microseconds": 500}}
    line = config_mismatch(eps, [same, other])
    assert line == "model config differs in dynamic_batching.max_queue_delay_microseconds: ep1 100, ep2 500"


def _snap(count: int, ns: int) -> StatsSnapshot:
    parts = ("success", "queue", "compute_input", "compute_infer", "compute_output")
    return StatsSnapshot(count, count, dict.fromkeys(parts, count), dict.fromkeys(parts, ns))


def test_summed_statistics_weigh_each_server_by_its_requests() -> None:
    before = summed([_snap(0, 0), _snap(0, 0)])
    after = summed([_snap(100, 100 * 1_000_000), _snap(300, 300 * 3_000_000)])
    found = breakdown(before, after, None)
    assert found is not None and found.request_count == 400
    assert found.server_total == pytest.approx((100 * 1e-3 + 300 * 3e-3) / 400)
    assert summed([None, None]) is None


def _groups(*groups: dict) -> dict:
    return {"name": "m", "max_batch_size": 8, "instance_group": list(groups)}


def test_config_mismatch_takes_gpu_placement_as_placement() -> None:
    eps = endpoints_from(["http://a:1", "http://b:1"])
    gpu0 = _groups({"name": "m_0", "kind": "KIND_GPU", "count": 2, "gpus": [0]})
    gpu1 = _groups({"name": "m_0", "kind": "KIND_GPU", "count": 2, "gpus": [1]})
    assert config_mismatch(eps, [gpu0, gpu1]) is None  # one-GPU servers on GPUs 0 and 1
    assert config_mismatch(eps, [gpu0, _groups({"name": "m_0", "kind": "KIND_GPU", "count": 2})]) is None


@pytest.mark.parametrize("others, line", [
    (({"name": "m_0", "kind": "KIND_GPU", "count": 3, "gpus": [1]},), "instance_group[0].count: ep1 2, ep2 3"),
    (({"name": "m_0", "kind": "KIND_CPU", "count": 2, "gpus": [1]},),
     "instance_group[0].kind: ep1 'KIND_GPU', ep2 'KIND_CPU'"),
    (({"name": "m_0", "kind": "KIND_GPU", "count": 2, "gpus": [1]}, {"name": "m_1", "kind": "KIND_GPU", "count": 1}),
     "instance_group[1].count: ep1 None, ep2 1"),
])
def test_config_mismatch_still_refuses_a_different_instance_group(others: tuple[dict, ...], line: str) -> None:
    eps = endpoints_from(["http://a:1", "http://b:1"])
    gpu0 = _groups({"name": "m_0", "kind": "KIND_GPU", "count": 2, "gpus": [0]})
    assert config_mismatch(eps, [gpu0, _groups(*others)]) == f"model config differs in {line}"


def test_config_mismatch_beside_a_placement_difference_is_still_named() -> None:
    eps = endpoints_from(["http://a:1", "http://b:1"])
    gpu0 = _groups({"name": "m_0", "kind": "KIND_GPU", "count": 2, "gpus": [0]})
    gpu1 = _groups({"name": "m_0", "kind": "KIND_GPU", "count": 2, "gpus": [1]})
    batching = {**gpu1, "dynamic_batching": {"max_queue_delay_microseconds": 500}}
    assert config_mismatch(eps, [gpu0, batching]) == ("model config differs in "
                                                      "dynamic_batching.max_queue_delay_microseconds: ep1 None, ep2 500")
    assert config_mismatch(eps, [gpu0, {**gpu1, "max_batch_size": 16}]) == (
        "model config differs in max_batch_size: ep1 8, ep2 16")
    assert config_mismatch(eps, [gpu0, {**gpu1, "backend": "onnxruntime"}]) == (
        "model config differs in backend: ep1 None, ep2 'onnxruntime'")


def test_server_ready_names_each_servers_gpu() -> None:
    from engine.triton.target_setup import endpoint_words

    assert endpoint_words(Endpoint("ep2", "http://127.0.0.1:8010", gpus=(1,))) == "ep2 http://127.0.0.1:8010 (GPU 1)"
    assert endpoint_words(Endpoint("ep1", "http://a:8000", gpus=(0, 1))) == "ep1 http://a:8000 (GPUs 0, 1)"
    assert endpoint_words(Endpoint("ep1", "http://u:p@a:8000")) == "ep1 http://***@a:8000"
