"""A remote server that accepts the repository load but keeps its old instance groups: the study
reads the config back and fails that variant with one line, instead of believing the override."""

from __future__ import annotations

import json

import pytest

from engine.errors import RunFailed
from engine.server.repository import REPOSITORY_ROOT
from engine.study.model_control import load_variant
from tests.reliability.hostile_server import HostileTriton, Reply, Seen, model_config

MODEL = "openclip_vit_b32"
TWO_GPUS = REPOSITORY_ROOT / MODEL / "config.multigpu.2x.pbtxt"  # 2 instances on each of GPUs 0 and 1
OLD = [{"name": f"{MODEL}_0", "kind": "KIND_GPU", "count": 1, "gpus": [0]}]


@pytest.mark.slow
def test_a_load_the_server_ignored_fails_the_variant_in_one_line():
    srv = HostileTriton(model=MODEL, config=Reply(200, model_config(MODEL, OLD)))  # load says 200, nothing changes
    with srv:
        with pytest.raises(RunFailed) as caught:
            load_variant(srv.url, MODEL, "2x", TWO_GPUS, {})
    message = str(caught.value)
    assert "\n" not in message
    assert "variant 2x: the server accepted the load but runs other instance groups" in message
    assert "1 x KIND_GPU on GPUs 0; asked for 2 x KIND_GPU on GPUs 0,1" in message
    assert any(s.path.endswith("/load") for s in srv.seen), "the load was never sent: nothing was checked"


@pytest.mark.slow
def test_a_load_the_server_applied_passes_with_what_triton_fills_in():
    running = {"config": model_config(MODEL, OLD)}

    def load(seen: Seen) -> Reply:
        sent = json.loads(json.loads(seen.body)["parameters"]["config"])
        groups = [{**g, "name": f"{MODEL}_{i}", "secondary_devices": [], "passive": False}  # as Triton answers
                  for i, g in enumerate(sent["instance_group"])]
        running["config"] = {**sent, "instance_group": groups}
        return Reply(200, {})

    with HostileTriton(model=MODEL, config=lambda _seen: Reply(200, running["config"]), load=load) as srv:
        config = load_variant(srv.url, MODEL, "2x", TWO_GPUS, {})
    assert config["instance_group"][0]["gpus"] == [0, 1]


def test_groups_match_rules():
    from engine.study.model_control import groups_match

    ours = [{"kind": "KIND_GPU", "count": 2, "gpus": [0, 1]}]
    assert groups_match(ours, [{"kind": "KIND_GPU", "count": 2, "gpus": [1, 0], "name": "x"}])
    assert not groups_match(ours, [{"kind": "KIND_GPU", "count": 2, "gpus": [0]}])
    assert not groups_match(ours, [{"kind": "KIND_GPU", "count": 1, "gpus": [0, 1]}])
    assert not groups_match(ours, None) and not groups_match(ours, [*ours, *ours])
    assert groups_match([{"count": 3}], [{"kind": "KIND_CPU", "count": 3, "gpus": []}])  # Triton fills kind in


@pytest.mark.slow
def test_a_load_error_that_echoes_our_credentials_shows_none_of_them():
    import base64

    token = base64.b64encode(b"bob:s3cret/pw42").decode()
    echo = lambda seen: Reply(400, {"error": f"denied {seen.headers.get('Authorization')} (bob:s3cret/pw42)"})  # noqa: E731
    with HostileTriton(model=MODEL, load=echo) as srv:
        with pytest.raises(RunFailed) as caught:
            load_variant(srv.url, MODEL, "2x", TWO_GPUS, {"Authorization": f"Basic {token}"})
    message = str(caught.value)
    assert "denied" in message and token not in message and "s3cret/pw42" not in message, message
