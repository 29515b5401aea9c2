"""nccl-tests' bandwidth definitions and the link limits busbw is set against."""

import pytest

from engine.probe import bandwidth as bw


def test_algbw_and_busbw_follow_nccl_tests():
    # 1 GiB in 10 ms: algbw = 1073741824 / 0.01 / 1e9 = 107.374 GB/s
    row = bw.allreduce_row(1 << 30, 0.01, world_size=4)
    assert row.algbw_gbps == pytest.approx(107.3741824)
    # busbw = algbw * 2 * 3 / 4 = 161.061
    assert row.busbw_gbps == pytest.approx(107.3741824 * 1.5)
    assert bw.allreduce_busbw_gbps(10.0, 2) == pytest.approx(10.0)  # 2(n-1)/n = 1 at n = 2
    assert bw.allreduce_busbw_gbps(10.0, 8) == pytest.approx(17.5)


def test_sweep_sizes_from_1_kib_to_the_maximum():
    sizes = bw.sweep_sizes(1 << 30)
    assert sizes[0] == 1024 and sizes[-1] == 1 << 30
    assert len(sizes) == 21  # 2^10 .. 2^30
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:], strict=False))
    assert bw.sweep_sizes(3000) == [1024, 2048, 3000]
    assert bw.sweep_sizes(512) == [512]


def test_iterations_shrink_only_for_slow_sizes():
    assert bw.iterations_for(1e-4) == 20
    assert bw.iterations_for(0.1) == 10  # 1 s budget / 0.1 s
    assert bw.iterations_for(2.0) == 3  # never fewer than 3


@pytest.mark.parametrize(
    "name, kwargs, limit, label",
    [
        ("NVIDIA H200", {}, 450.0, "NVLink4 x18"),  # 18 links x 25 GB/s per direction
        ("NVIDIA H100 80GB HBM3", {"nvlink_links": 18}, 450.0, "NVLink4 x18"),
        ("NVIDIA A100-SXM4-80GB", {}, 300.0, "NVLink3 x12"),
        ("NVIDIA A100-SXM4-80GB", {"nvlink_links": 0, "pcie_gen": 4, "pcie_width": 16}, 31.504, "PCIe Gen4 x16"),
        ("NVIDIA H100 PCIe", {"pcie_gen": 5, "pcie_width": 16}, 63.008, "PCIe Gen5 x16"),
        ("NVIDIA GeForce RTX 4080", {"peer_access": False}, 31.504, "PCIe Gen4 x16 (no P2P: via host memory)"),
        ("NVIDIA GeForce RTX 4080", {"nvlink_links": 0, "pcie_gen": 4, "pcie_width": 8}, 15.752, "PCIe Gen4 x8"),
    ],
)
def test_link_limits(name, kwargs, limit, label):
    info = bw.link_limit(name, **kwargs)
    assert info.limit_gbps == pytest.approx(limit)
    assert info.label == label


def test_cpu_and_unknown_gpus_have_no_invented_limit():
    assert bw.link_limit(None) == bw.LinkInfo(None, "host memory (gloo)")
    assert bw.link_limit("Some Future GPU").limit_gbps is None
