"""Scale-out variants (1x*N, cpu*N): their names, planning, the index, the profile key and which
GPU each server is pinned to (pure)."""

import pytest

from engine.errors import UserError
from engine.profiles import ProfileError, load_profile, scale_out_parts
from engine.server.fleet import pin_servers, visible_gpus
from engine.study.index import StudyIndex, VariantRun, read_index, write_index
from engine.study.variants import (
    is_gpu_variant,
    parse_variants,
    plan_variants,
    refuse_scale_out_remote,
    scale_out_variant,
    variant_order,
    variant_units,
)


def test_names():
    assert scale_out_parts("1x*4") == ("1x", 4) and scale_out_parts("cpu*2") == ("cpu", 2)
    assert scale_out_parts("cpu2*3") == ("cpu2", 3)
    for plain in ("1x", "4x", "cpu", "cpu2", "auto", "2x*2", "1x*0", "1x*", "cpu0*2"):
        assert scale_out_parts(plain) is None, plain
    assert variant_units("1x*4") == 4 and variant_units("cpu*2") == 2 and variant_units("cpu2*3") == 6
    assert is_gpu_variant("1x*4") and not is_gpu_variant("cpu*2")
    assert sorted(["1x*4", "4x", "1x", "2x", "cpu*2", "cpu2", "cpu"], key=variant_order) == [
        "cpu", "cpu2", "cpu*2", "1x", "2x", "4x", "1x*4"]


def test_parse():
    assert parse_variants("1x,2x,1X*2") == ["1x", "2x", "1x*2"]
    assert parse_variants("cpu,cpu*2") == ["cpu", "cpu*2"]
    for bad in ("2x*2", "1x*0", "1x**2", "1x,1x*2,1x*2"):
        with pytest.raises(UserError, match="--variants"):
            parse_variants(bad)


def test_plan_needs_the_base_config_and_a_gpu_per_server():
    assert plan_variants("openclip_vit_b32", ["1x*4", "4x", "1x"], 4) == ["1x", "4x", "1x*4"]
    assert plan_variants("identity", ["cpu*2", "cpu2", "cpu"], 0) == ["cpu", "cpu2", "cpu*2"]
    with pytest.raises(UserError, match=r"variant 1x\*4 needs 4 GPUs \(one per server\); this machine has 2"):
        plan_variants("openclip_vit_b32", ["1x*4"], 2)
    with pytest.raises(UserError, match=r"variant 1x\*2: model 'identity' has no 1x variant"):
        plan_variants("identity", ["1x*2"], 2)
    with pytest.raises(UserError, match="scale-out variants start embedded servers"):
        refuse_scale_out_remote(["1x", "1x*2"])
    refuse_scale_out_remote(["1x", "2x"])
    refuse_scale_out_remote(None)


def test_the_variant_scale_out_adds():
    assert scale_out_variant(["1x", "2x", "4x"], 4) == "1x*4"
    assert scale_out_variant(["1x", "2x"], 8) == "1x*2"
    assert scale_out_variant(["1x"], 1) == "1x*2"  # one GPU: two servers share it (the mechanics)
    assert scale_out_variant(["cpu", "cpu2"], 0) == "cpu*2"


def test_index_keeps_scale_out_variants_and_the_box_price(tmp_path):
    index = StudyIndex(study_id="s", profile="p", model="m", variants=["1x", "2x", "1x*2"], server="embedded",
                       runs=[VariantRun("1x*2", "a.sqlite", "ok", 0)], scale_out_price=0.3,
                       scale_out_price_from="hardware.cost_per_hour of profile 1x_rtx4080")
    path = tmp_path / "x.study.json"
    write_index(index, path)
    back = read_index(path)
    assert back.finished == ["1x*2"] and back.scale_out_price == 0.3 and "1x_rtx4080" in back.scale_out_price_from
    path.write_text(path.read_text().replace('"scale_out_price": 0.3', '"scale_out_price": -1'))
    with pytest.raises(UserError, match="scale_out_price"):
        read_index(path)


def test_profile_takes_a_scale_out_variant_for_the_embedded_server_only():
    assert load_profile("local", ["model.variant=cpu*2"]).model.variant == "cpu*2"
    with pytest.raises(ProfileError, match="model.variant"):
        load_profile("local", ["model.variant=2x*2"])
    with pytest.raises(ProfileError, match="server.urls"):
        load_profile("local", ["model.variant=cpu*2", "server.kind=remote", "server.url=http://127.0.0.1:8000"])


def test_servers_are_pinned_one_per_gpu():
    assert visible_gpus(4, None) == ["0", "1", "2", "3"]
    assert visible_gpus(2, "2,3") == ["2", "3"]  # our own list: server 1 sees the machine's GPU 2
    assert visible_gpus(0, "") == []
    assert pin_servers("1x*4", ["0", "1", "2", "3"]) == ["0", "1", "2", "3"]
    assert pin_servers("1x*2", ["0"]) == ["0", "0"]  # more servers than GPUs: they share
    assert pin_servers("cpu*2", []) == [None, None]
    with pytest.raises(UserError, match=r"variant 1x\*2 needs a GPU per server: this machine has none"):
        pin_servers("1x*2", [])
    with pytest.raises(UserError, match="not a scale-out variant"):
        pin_servers("2x", ["0", "1"])


def test_a_gpu_fleet_is_built_one_server_per_gpu(monkeypatch):
    from engine.server.fleet import ServerFleet

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fleet = ServerFleet("1x*2", gpu_count=2, model="openclip_vit_b32")  # built, not started
    assert [(s.requested_variant, s.pinned_gpu, s.gpu_count) for s in fleet.servers] == [("1x", "0", 1), ("1x", "1", 1)]
    assert fleet.client_gpus == [0, 1] and not fleet.shared and fleet.variant == "1x*2"
    assert fleet.name(1) == "server 2 of 2 (GPU 1)"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    shared = ServerFleet("1x*2", gpu_count=1, model="openclip_vit_b32")
    # pinned to the machine's GPU 3, which this process (and its load workers) number 0
    assert [s.pinned_gpu for s in shared.servers] == ["3", "3"] and shared.client_gpus == [0, 0] and shared.shared
    with pytest.raises(UserError, match="needs a GPU per server"):
        ServerFleet("1x*2", gpu_count=0, model="openclip_vit_b32")


def test_each_gpu_server_of_a_fleet_counts_its_instances_on_its_share_of_the_cores():
    from engine.server.fleet import ServerFleet

    fleet = ServerFleet("1x*4", gpu_count=4, model="openclip_vit_b32", cpus=tuple(range(16)))
    assert [s.host_cores for s in fleet.servers] == [4, 4, 4, 4]  # as four boxes of a quarter each
    cpu = ServerFleet("cpu*2", gpu_count=0, model="identity", cpus=(0, 1, 2))
    assert [s.host_cores for s in cpu.servers] == [None, None] and [s.compute_threads for s in cpu.servers] == [2, 1]


def test_a_pinned_server_is_pinned_by_its_gpus_uuid_where_nvml_knows_it():
    """Under its private MPS daemon, a server pinned by index 1 asks its MPS server (which sees
    one GPU) for a device 1 that does not exist; a UUID names the same GPU to both."""
    from engine import libnvml
    from engine.server.gpus import pin_value
    from tests.engine.telemetry.fake_nvml import FakeGpu, FakeNvml

    with libnvml.stand_in(FakeNvml([FakeGpu(0, "GPU-aaaa"), FakeGpu(1, "GPU-bbbb")])):
        assert pin_value("1") == "GPU-bbbb"
        assert pin_value("0") == "GPU-aaaa"
        assert pin_value("GPU-cccc") == "GPU-cccc"  # already a UUID in our own list
        assert pin_value("7") == "7"  # an index NVML does not know: as given
