"""Topology: NVML's answers -> GpuLinks, and the one-line summary the reports quote."""

from __future__ import annotations

from engine import libnvml
from engine.events import GpuLink
from engine.telemetry.nvml_gpus import NvmlGpus
from engine.telemetry.once import WarnOnce
from engine.telemetry.topology import read_topology, summarize_topology
from tests.engine.telemetry.fake_nvml import FakeGpu, FakeLink, FakeNvml

SWITCH = libnvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
# nvidia-ml-py 13 defines some of these as 1-tuples; NVML itself takes plain ints
READ, WRITE, NVLINK = (
    int(c[0] if isinstance(c, tuple) else c)
    for c in (libnvml.NVML_P2P_CAPS_INDEX_READ, libnvml.NVML_P2P_CAPS_INDEX_WRITE, libnvml.NVML_P2P_CAPS_INDEX_NVLINK)
)


def _topology(fake: FakeNvml):
    gpus = NvmlGpus(WarnOnce(lambda e: None), nvml=fake)
    assert gpus.open()
    return read_topology(fake, gpus.devices, ts=1.0)


def _pci(i: int) -> tuple[int, int, int]:
    return (0, 0x10 + i, 0)


def test_hgx_h200_through_nvswitch():
    gpus = [
        FakeGpu(i, f"GPU-{i}", pci=_pci(i), links=[FakeLink(remote_pci=(0, 0xC0 + k % 4, 0), remote_type=SWITCH) for k in range(18)])
        for i in range(4)
    ]
    topo = _topology(FakeNvml(gpus, ancestor=libnvml.NVML_TOPOLOGY_SYSTEM))
    assert len(topo.links) == 6
    assert {link.nvlink_count for link in topo.links} == {18}
    assert topo.gpus[0]["nvlink_links_up"] == 18 and topo.gpus[0]["nvlink_to_switch"] == 18
    assert topo.gpus[0]["pcie_gen_max"] == 5 and topo.gpus[0]["pcie_width_max"] == 16
    assert topo.summary == "4x NVIDIA H200, NVLink x18 between every pair (NVSwitch)"


def test_four_geforce_cards_without_p2p():
    gpus = [FakeGpu(i, f"GPU-{i}", name="NVIDIA GeForce RTX 4080", pci=_pci(i), pcie_gen_max=4) for i in range(4)]
    fake = FakeNvml(gpus, p2p_default=libnvml.NVML_P2P_STATUS_GPU_NOT_SUPPORTED, ancestor=libnvml.NVML_TOPOLOGY_HOSTBRIDGE)
    topo = _topology(fake)
    assert all(link.nvlink_count == 0 for link in topo.links)
    assert topo.links[0].p2p_read == "GPU not supported" and topo.links[0].common_ancestor == "PHB"
    assert topo.summary == "4x NVIDIA GeForce RTX 4080, PCIe only (Gen4 x16), no P2P: NCCL goes through host memory"


def test_nvlink_bridges_between_pairs_are_counted_per_pair():
    # two A100 PCIe bridged pairs: 0<->1 and 2<->3, 4 links each, nothing else
    gpus = [FakeGpu(i, f"GPU-{i}", name="NVIDIA A100 80GB PCIe", pci=_pci(i), pcie_gen_max=4) for i in range(4)]
    for a, b in ((0, 1), (2, 3)):
        gpus[a].links = [FakeLink(remote_pci=_pci(b)) for _ in range(4)]
        gpus[b].links = [FakeLink(remote_pci=_pci(a)) for _ in range(4)]
    topo = _topology(FakeNvml(gpus, ancestor=libnvml.NVML_TOPOLOGY_NODE))
    counts = {(link.a, link.b): link.nvlink_count for link in topo.links}
    assert counts[("GPU-0", "GPU-1")] == 4 and counts[("GPU-2", "GPU-3")] == 4
    assert counts[("GPU-0", "GPU-2")] == 0 and counts[("GPU-1", "GPU-3")] == 0
    assert topo.summary == "4x NVIDIA A100 80GB PCIe, NVLink between 2 of 6 pairs, the rest over PCIe with P2P"


def test_p2p_between_some_pairs():
    gpus = [FakeGpu(i, f"GPU-{i}", name="NVIDIA L40S", pci=_pci(i), pcie_gen_max=4) for i in range(3)]
    bad = libnvml.NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED
    p2p = {(0, 2, READ): bad, (0, 2, WRITE): bad, (1, 2, READ): bad, (1, 2, WRITE): bad}
    topo = _topology(FakeNvml(gpus, p2p=p2p))
    assert topo.summary == "3x NVIDIA L40S, PCIe only (Gen4 x16), P2P between 1 of 3 pairs; the rest go through host memory"


def test_single_gpu_and_no_gpu():
    topo = _topology(FakeNvml([FakeGpu(0, "GPU-0")]))
    assert topo.links == [] and topo.summary == "1x NVIDIA H200, PCIe Gen5 x16"
    assert summarize_topology([], []) == "no NVIDIA GPU visible to NVML"


def test_summary_rules_on_plain_data():
    gpus = [{"name": "NVIDIA H100 80GB HBM3"}, {"name": "NVIDIA H100 80GB HBM3"}]
    ok = GpuLink(a="x", b="y", p2p_read="ok", p2p_write="ok", common_ancestor="PXB")
    assert summarize_topology(gpus, [ok]) == "2x NVIDIA H100 80GB HBM3, PCIe only, P2P between every pair (farthest path PXB)"
    unknown = GpuLink(a="x", b="y")
    assert summarize_topology(gpus, [unknown]) == "2x NVIDIA H100 80GB HBM3, PCIe only, P2P status unknown"
    mixed = [{"name": "NVIDIA A100-SXM4-80GB"}, {"name": "NVIDIA H100 80GB HBM3"}]
    assert summarize_topology(mixed, [unknown]).startswith("1x NVIDIA A100-SXM4-80GB + 1x NVIDIA H100 80GB HBM3, ")
    uneven = [GpuLink(a="a", b="b", nvlink_count=12), GpuLink(a="a", b="c", nvlink_count=4), GpuLink(a="b", b="c", nvlink_count=4)]
    assert summarize_topology([{"name": "G"}] * 3, uneven) == "3x G, NVLink x4-x12 between every pair"


def test_topology_survives_to_dict_round_trip():
    from engine.events import event_from_dict

    topo = _topology(FakeNvml([FakeGpu(0, "GPU-0", pci=_pci(0)), FakeGpu(1, "GPU-1", pci=_pci(1))]))
    again = event_from_dict(topo.to_dict())
    assert again == topo
