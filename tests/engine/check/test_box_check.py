"""`gpuscale-tui check` against the NVML stand-in: each way a rented box goes wrong gives the
verdict it should, with the measured and the expected figure. The CUDA child's output is stood
in by a dict of the same shape (measure.py's JSON); the host by fixed facts, so that the
verdicts do not depend on this 2-core machine (the real host path runs in test_check_cli.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pynvml
import pytest

from engine.check import run as check_run
from engine.check.facts import ExpectedHardware, HostFacts
from engine.check.render import render_text
from engine.check.run import run_check
from engine.events import BoxCheck, CheckItem
from tests.engine.telemetry.fake_nvml import FakeGpu, FakeLink, FakeNvml

GIB = 1 << 30
SWITCH = pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
READ, WRITE = (int(c[0] if isinstance(c, tuple) else c)
               for c in (pynvml.NVML_P2P_CAPS_INDEX_READ, pynvml.NVML_P2P_CAPS_INDEX_WRITE))
H200 = ExpectedHardware(profile="4x_h200", gpu_model="H200", gpu_count=4, vram_gb=141, interconnect="sxm",
                        vcpus=64, ram_gb=512)
BIG_HOST = HostFacts(cpu_cores=64, cpu_cores_online=64, ram_bytes=1024 * GIB, disk_free_bytes=500 * GIB,
                     disk_path="recordings", mps_control="/usr/bin/nvidia-cuda-mps-control")


@pytest.fixture(autouse=True)
def fixed_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_run, "read_host_facts", lambda _dir: HostFacts(**vars(BIG_HOST)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # every GPU, unless a test pins some


def hgx(n: int = 4, **overrides: Any) -> list[FakeGpu]:
    """n H200 SXM on an NVSwitch, 141 GiB... as NVML reports them (140 GiB usable)."""
    gpus = []
    for i in range(n):
        gpu = FakeGpu(i, f"GPU-{i}", pci=(0, 0x10 + i, 0), mem_used=512 << 20, mem_total=140 * GIB, util_gpu=0,
                      pcie_gen=1, links=[FakeLink(remote_pci=(0, 0xC0, 0), remote_type=SWITCH) for _ in range(18)])
        for key, value in overrides.items():
            setattr(gpu, key, value)
        gpus.append(gpu)
    return gpus


def child_output(gpus: list[FakeGpu], *, h2d: float = 52.0, d2d: float = 380.0, gen: int = 5, width: int = 16,
                 throttle: int = 0, temp: float = 60.0, per_gpu: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """What engine.check.measure prints for these GPUs (torch numbering = NVML's here)."""
    out = []
    for g in gpus:
        m = {"index": g.index, "uuid": g.uuid, "h2d_gbps": h2d,
             "copy_load": {"pcie_gen": gen, "pcie_width": width, "throttle_reasons": 0},
             "compute_load": {"throttle_reasons": throttle, "temp_c_max": temp, "power_w_max": 650.0}}
        for key, value in (per_gpu or {}).get(g.index, {}).items():
            if key in ("pcie_gen", "pcie_width"):
                m["copy_load"][key] = value
            elif key in ("throttle_reasons", "temp_c_max"):
                m["compute_load"][key] = value
            else:
                m[key] = value
        out.append(m)
    pairs = [{"a": a.index, "b": b.index, "d2d_gbps": d2d, "peer_access": True}
             for a in gpus for b in gpus if a.index < b.index]
    return {"gpus": out, "pairs": pairs}


def check(fake: FakeNvml, expected: ExpectedHardware = H200, *, measured: dict[str, Any] | None = None,
          busbw: float | None = 370.0, measure: bool = True) -> BoxCheck:
    return run_check(expected, Path("recordings"), measure=measure, nvml=fake,
                     measurer=lambda: measured if measured is not None else child_output(fake.gpus),
                     allreducer=lambda n: (busbw, 256 << 20, None if busbw else "NCCL failed"))


def find(result: BoxCheck, name: str, scope: str | None = None) -> CheckItem:
    found = [i for i in result.items if i.name == name and (scope is None or i.scope == scope)]
    assert len(found) == 1, [(i.name, i.scope) for i in result.items]
    return found[0]


def statuses(result: BoxCheck) -> dict[str, str]:
    return {f"{i.scope}/{i.name}": i.status for i in result.items}


# --------------------------------------------------------------------------- a good box


def test_a_healthy_hgx_box_is_a_go():
    result = check(FakeNvml(hgx()))
    bad = {k: v for k, v in statuses(result).items() if v != "ok"}
    assert bad == {}
    assert result.verdict == "go" and result.summary.startswith("GO: ") and result.gpus == 4
    link = find(result, "pcie link", "GPU 0")
    # idle at Gen1 (trained down to save power), Gen5 under load: that is fine
    assert link.measured == "Gen5 x16 under load (idle Gen1 x16)" and link.expected == "Gen5 x16"
    ar = find(result, "all-reduce busbw")
    assert ar.measured == "370.0 GB/s at 256 MiB" and ar.expected == "360.0 GB/s (NVLink x18)"
    assert find(result, "device-to-device bandwidth").expected == "360.0 GB/s (NVLink x18)"
    assert result.facts["gpus"][0]["load"]["pcie_gen"] == 5


# --------------------------------------------------------------------------- PCIe


def test_an_x4_link_fails():
    fake = FakeNvml(hgx(2))
    result = check(fake, measured=child_output(fake.gpus, h2d=6.0, per_gpu={1: {"pcie_width": 4}}))
    link = find(result, "pcie link", "GPU 1")
    assert link.status == "fail" and link.measured.startswith("Gen5 x4 under load") and link.expected == "Gen5 x16"
    assert "riser" in link.note
    assert find(result, "pcie link", "GPU 0").status == "ok"
    assert result.verdict == "no-go" and "GPU 1 pcie link: Gen5 x4" in result.summary


def test_gen1_under_load_fails_and_an_x8_link_warns():
    fake = FakeNvml(hgx(2, pcie_width_max=16))
    measured = child_output(fake.gpus, per_gpu={0: {"pcie_gen": 1}, 1: {"pcie_width": 8}})
    result = check(fake, measured=measured)
    gen1 = find(result, "pcie link", "GPU 0")
    assert gen1.status == "fail" and gen1.measured.startswith("Gen1 x16 under load")
    x8 = find(result, "pcie link", "GPU 1")
    assert x8.status == "warn" and "x8" in x8.note


def test_a_link_trained_below_the_slot_and_an_old_slot_warn():
    fake = FakeNvml(hgx(2))
    fake.gpus[1].pcie_gen_max = 4  # a Gen4 slot for a Gen5 GPU
    result = check(fake, measured=child_output(fake.gpus, per_gpu={0: {"pcie_gen": 4}, 1: {"pcie_gen": 4}}))
    below = find(result, "pcie link", "GPU 0")
    assert below.status == "warn" and "trained to Gen4 under load where the slot allows Gen5" in below.note
    old = find(result, "pcie link", "GPU 1")
    assert old.status == "warn" and "the slot allows Gen4, the GPU can do Gen5" in old.note


def test_idle_only_readings_cannot_clear_a_trained_down_link():
    result = check(FakeNvml(hgx(1)), measure=False)
    link = find(result, "pcie link", "GPU 0")
    assert link.status == "warn" and link.measured == "Gen1 x16 idle" and "idle reading only" in link.note
    assert find(result, "host-to-device bandwidth", "GPU 0").note == "skipped (--quick): idle readings only"


def test_slow_host_to_device_copies_fail():
    fake = FakeNvml(hgx(1))
    result = check(fake, measured=child_output(fake.gpus, h2d=12.0))
    h2d = find(result, "host-to-device bandwidth", "GPU 0")
    # Gen5 x16: 3.938 GB/s x 16 lanes x 0.8 in practice
    assert h2d.status == "fail" and h2d.measured == "12.0 GB/s" and h2d.expected == "50.4 GB/s (PCIe Gen5 x16)"


# --------------------------------------------------------------------------- between GPUs


def _geforce(n: int) -> list[FakeGpu]:
    return [FakeGpu(i, f"GPU-{i}", name="NVIDIA GeForce RTX 4080", pci=(0, 0x10 + i, 0), mem_total=16 * GIB,
                    mem_used=300 << 20, util_gpu=0, pcie_gen_max=4, pcie_gen_gpu_max=4, default_limit_mw=320_000,
                    limit_mw=320_000) for i in range(n)]


def test_p2p_off_warns_and_sets_what_copies_should_reach():
    gpus = _geforce(2)
    fake = FakeNvml(gpus, p2p_default=pynvml.NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED)
    result = check(fake, ExpectedHardware(), measured=child_output(gpus, gen=4, h2d=24.0, d2d=9.0), busbw=8.0)
    p2p = find(result, "p2p")
    assert p2p.status == "warn" and p2p.measured == "P2P between 0 of 1 pairs; off: 0-1"
    assert "chipset not supported" in p2p.note
    d2d = find(result, "device-to-device bandwidth")
    assert d2d.status == "ok" and d2d.expected == "10.1 GB/s (PCIe Gen4 x16 without P2P (via host memory))"
    assert find(result, "all-reduce busbw").status == "ok"
    assert result.verdict == "warn" and result.summary.startswith("GO, with warnings")


def test_p2p_between_some_pairs_only():
    gpus = _geforce(3)
    bad = pynvml.NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED
    fake = FakeNvml(gpus, p2p={(0, 2, READ): bad, (0, 2, WRITE): bad})
    result = check(fake, ExpectedHardware(), measured=child_output(gpus, gen=4, h2d=24.0, d2d=20.0), busbw=18.0)
    assert find(result, "p2p").measured == "P2P between 2 of 3 pairs; off: 0-2"


def test_slow_all_reduce_and_a_missing_one():
    fake = FakeNvml(hgx(2))
    low = check(fake, busbw=60.0)
    ar = find(low, "all-reduce busbw")
    assert ar.status == "fail" and "17 % of what NVLink x18 gives" in ar.note
    failed = check(FakeNvml(hgx(2)), busbw=None)
    assert find(failed, "all-reduce busbw").status == "n/a" and find(failed, "all-reduce busbw").note == "NCCL failed"


def test_an_nvlink_down_on_one_gpu_warns():
    gpus = hgx(2)
    gpus[1].links = gpus[1].links[:12]
    result = check(FakeNvml(gpus))
    nv = find(result, "nvlink links")
    assert nv.status == "warn" and nv.measured == "links up GPU 1: 12" and nv.expected == "18 on every GPU"


# --------------------------------------------------------------------------- power, heat, health


def test_a_lowered_power_limit():
    fake = FakeNvml(hgx(2))
    fake.gpus[0].limit_mw = 450_000  # 64 % of 700 W
    fake.gpus[1].limit_mw = 650_000  # 93 %
    result = check(fake)
    p0, p1 = find(result, "power limit", "GPU 0"), find(result, "power limit", "GPU 1")
    assert (p0.status, p0.measured, p0.expected) == ("fail", "450 W", "700 W")
    assert p1.status == "warn" and "93 %" in p1.note


def test_throttling_under_load_and_at_idle():
    fake = FakeNvml(hgx(3))
    fake.gpus[2].throttle = 0x4 | 0x1  # power cap while idle: a very low limit somewhere
    measured = child_output(fake.gpus, per_gpu={0: {"throttle_reasons": 0x40}, 1: {"throttle_reasons": 0x20}})
    result = check(fake, measured=measured)
    hw = find(result, "clock throttling", "GPU 0")
    assert hw.status == "fail" and hw.measured == "hardware thermal slowdown under load"
    assert find(result, "clock throttling", "GPU 1").status == "warn"
    assert find(result, "clock throttling", "GPU 2").measured == "power cap reached while idle"
    assert find(result, "clock throttling", "GPU 2").status == "warn"


def test_power_cap_under_full_load_is_normal():
    fake = FakeNvml(hgx(1))
    result = check(fake, measured=child_output(fake.gpus, throttle=0x4))
    assert find(result, "clock throttling", "GPU 0").status == "ok"


def test_hot_gpus():
    fake = FakeNvml(hgx(2))
    fake.gpus[0].temp = 70  # idle, 20 C below the 90 C slowdown
    result = check(fake, measured=child_output(fake.gpus, per_gpu={1: {"temp_c_max": 91.0}}))
    assert find(result, "temperature", "GPU 0").status == "warn"
    hot = find(result, "temperature", "GPU 1")
    assert hot.status == "fail" and hot.measured == "45 C idle, 91 C under load"


def test_ecc_errors_pending_retirement_and_no_ecc():
    fake = FakeNvml(hgx(3))
    fake.gpus[0].ecc_uncorrected = 3
    fake.gpus[1].remap = (0, 1, 1, 0)
    result = check(fake)
    assert find(result, "ecc / retired pages", "GPU 0").status == "fail"
    assert find(result, "ecc / retired pages", "GPU 1").status == "warn"
    assert find(result, "ecc / retired pages", "GPU 2").status == "ok"
    geforce = _geforce(1)
    geforce[0].unsupported = {"nvmlDeviceGetEccMode", "nvmlDeviceGetRetiredPagesPendingStatus", "nvmlDeviceGetRemappedRows"}
    ecc = find(check(FakeNvml(geforce), ExpectedHardware(), measured=child_output(geforce, gen=4, h2d=24.0)),
               "ecc / retired pages")
    assert ecc.status == "n/a" and "GeForce" in ecc.note


# --------------------------------------------------------------------------- other tenants


def test_a_foreign_process_fails(monkeypatch: pytest.MonkeyPatch):
    fake = FakeNvml(hgx(2))
    fake.gpus[1].processes = [(999_999, 20 * GIB)]
    result = check(fake)
    occ = find(result, "other processes", "GPU 1")
    assert occ.status == "fail" and occ.measured == "proc999999 (999999, 20.0 GiB)"
    assert find(result, "other processes", "GPU 0").status == "ok"


def test_our_own_process_is_no_tenant():
    import os

    fake = FakeNvml(hgx(1))
    fake.gpus[0].processes = [(os.getpid(), 1 * GIB)]
    assert find(check(fake), "other processes", "GPU 0").status == "ok"


def test_memory_used_by_something_nvml_cannot_show():
    fake = FakeNvml(hgx(2))
    fake.gpus[0].mem_used = 30 * GIB  # 21 %: another container?
    fake.gpus[1].mem_used = 100 * GIB
    result = check(fake)
    assert find(result, "other processes", "GPU 0").status == "warn"
    assert find(result, "other processes", "GPU 1").status == "fail"


# --------------------------------------------------------------------------- the profile


def test_a_box_that_is_not_the_listing():
    gpus = _geforce(2)
    result = check(FakeNvml(gpus), H200, measured=child_output(gpus, gen=4, h2d=24.0, d2d=20.0), busbw=18.0)
    assert find(result, "gpu count").status == "fail" and find(result, "gpu count").measured == "2"
    model = find(result, "gpu model")
    assert model.status == "fail" and model.measured == "NVIDIA GeForce RTX 4080" and model.expected == "H200"
    vram = find(result, "vram")
    assert vram.status == "fail" and vram.measured == "16.0 GiB" and vram.expected == "141 GiB (listed as 141 GB)"
    inter = find(result, "interconnect")
    assert inter.status == "fail" and inter.measured == "NVLink between 0 of 1 pairs"
    assert result.verdict == "no-go"


def test_a_pcie_listing_with_an_older_generation_and_a_small_host(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(check_run, "read_host_facts", lambda _dir: HostFacts(
        cpu_cores=4, cpu_cores_online=32, ram_bytes=24 * GIB, disk_free_bytes=GIB // 2, disk_path="/data"))
    gpus = _geforce(2)
    expected = ExpectedHardware(profile="2x", gpu_model="RTX 4080", gpu_count=2, vram_gb=16,
                                interconnect="pcie_gen4", vcpus=32, ram_gb=64)
    result = check(FakeNvml(gpus), expected, measured=child_output(gpus, gen=3, h2d=12.0, d2d=10.0), busbw=9.0)
    assert find(result, "gpu model").status == "ok" and find(result, "gpu count").status == "ok"
    inter = find(result, "interconnect")
    assert (inter.status, inter.measured, inter.expected) == ("fail", "PCIe Gen3", "PCIe Gen4")
    assert find(result, "vcpus").status == "fail" and find(result, "ram", "profile 2x").status == "fail"
    cores = find(result, "cpu cores", "host")
    assert cores.status == "warn" and cores.measured == "4 of 32 online usable = 2 per GPU"
    assert find(result, "disk free").status == "fail"


# --------------------------------------------------------------------------- degraded paths


def test_no_gpu_checks_the_host_only():
    result = check(FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND), ExpectedHardware())
    assert result.gpus == 0 and result.verdict == "go"
    assert {i.scope for i in result.items} == {"host", "profile"}
    assert "no GPU (NVML unavailable (no NVIDIA driver: libnvidia-ml.so.1 not found))" in result.summary


def test_a_gpu_box_without_mps_warns_and_one_without_gpus_is_not_asked(monkeypatch: pytest.MonkeyPatch):
    assert find(check(FakeNvml(hgx())), "mps").measured == "/usr/bin/nvidia-cuda-mps-control"
    monkeypatch.setattr(check_run, "read_host_facts", lambda _dir: HostFacts(**{**vars(BIG_HOST), "mps_control": None}))
    result = check(FakeNvml(hgx()))
    mps = find(result, "mps")
    assert (mps.status, mps.measured) == ("warn", "nvidia-cuda-mps-control not found")
    assert "take turns on each GPU" in mps.note and result.verdict == "warn"
    no_gpu = check(FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND), ExpectedHardware())
    assert not [i for i in no_gpu.items if i.name == "mps"]


def test_the_measurements_failing_leaves_idle_verdicts_and_says_why():
    result = check(FakeNvml(hgx(2)), measured={"error": "torch sees no CUDA device: bandwidth and load not measured"})
    h2d = find(result, "host-to-device bandwidth", "GPU 0")
    assert h2d.status == "n/a" and h2d.note.startswith("torch sees no CUDA device")
    ar = find(result, "all-reduce busbw")
    assert ar.status == "n/a" and ar.note.startswith("torch sees no CUDA device")


def test_measurements_follow_uuids_not_torch_numbers():
    """CUDA_VISIBLE_DEVICES=2,0: torch's cuda:0 is NVML's GPU 2."""
    fake = FakeNvml(hgx(3))
    measured = child_output([fake.gpus[2], fake.gpus[0]])
    measured["gpus"][0]["index"], measured["gpus"][1]["index"] = 0, 1
    measured["gpus"][0]["h2d_gbps"] = 10.0  # GPU 2 is the slow one
    measured["pairs"] = [{"a": 0, "b": 1, "d2d_gbps": 50.0, "peer_access": True}]
    result = check(fake, measured=measured)
    assert find(result, "host-to-device bandwidth", "GPU 2").measured == "10.0 GB/s"
    assert find(result, "host-to-device bandwidth", "GPU 1").status == "n/a"  # not visible to torch
    d2d = find(result, "device-to-device bandwidth")
    assert d2d.measured == "0->2: 50.0 GB/s"


def test_the_load_sampler_keeps_the_highest_link_and_every_throttle_bit():
    """measure.py's NVML sampler (the part of the CUDA child that runs without CUDA)."""
    import time

    from engine.check.measure import LoadSampler

    fake = FakeNvml(hgx(1, pcie_gen=1, throttle=0x1, temp=40))
    gpu = fake.gpus[0]
    with LoadSampler({0: (fake, gpu)}) as sampler:
        time.sleep(0.05)
        gpu.pcie_gen, gpu.throttle, gpu.temp = 5, 0x20, 71  # trained up, then thermal slowdown
        time.sleep(0.05)
        gpu.pcie_gen, gpu.throttle = 2, 0x4
        time.sleep(0.05)
    seen = sampler.seen[0]
    assert seen["pcie_gen"] == 5 and isinstance(seen["pcie_gen"], int) and seen["pcie_width"] == 16
    assert seen["throttle_reasons"] == 0x1 | 0x20 | 0x4
    assert seen["temp_c_max"] == 71 and seen["power_w_max"] == 350.0 and seen["sm_clock_mhz_max"] == 1980


# --------------------------------------------------------------------------- CUDA_VISIBLE_DEVICES

H200_2X = ExpectedHardware(**{**vars(H200), "profile": "2x_h200", "gpu_count": 2})


def uuid_box(n: int = 4) -> FakeNvml:
    """hgx with UUIDs as NVML gives them: GPU i's starts GPU-iiii."""
    fake = FakeNvml(hgx(n))
    for g in fake.gpus:
        g.uuid = f"GPU-{g.index}{g.index}{g.index}{g.index}c0de-d72c-4106-c12f-20bd9faed9f6"
    return fake


def pinned(fake: FakeNvml, visible: list[int], expected: ExpectedHardware = H200_2X,
           seen: list[int] | None = None) -> BoxCheck:
    """The check as the CUDA child sees these GPUs (torch numbers them 0..n-1, in this order);
    ``seen`` gets the all-reduce's world size."""
    measured = child_output([fake.gpus[i] for i in visible])
    for torch_index, m in enumerate(measured["gpus"]):
        m["index"] = torch_index
    measured["pairs"] = [{"a": a, "b": b, "d2d_gbps": 380.0, "peer_access": True}
                         for a in range(len(visible)) for b in range(a + 1, len(visible))]

    def allreduce(n: int) -> tuple[float, int, None]:
        if seen is not None:
            seen.append(n)
        return 370.0, 256 << 20, None

    return run_check(expected, Path("recordings"), nvml=fake, measurer=lambda: measured, allreducer=allreduce)


def gpu_scopes(result: BoxCheck) -> set[str]:
    return {i.scope for i in result.items if i.scope.startswith("GPU ")}


def test_indices_check_only_the_visible_gpus(monkeypatch: pytest.MonkeyPatch):
    """CUDA_VISIBLE_DEVICES=0,1 on a 4-GPU box: rows, pairs, links and the all-reduce are about
    GPUs 0 and 1, named by their machine index."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    fake = uuid_box()
    fake.gpus[3].links = fake.gpus[3].links[:12]  # an NVLink down on a GPU the run does not use
    world: list[int] = []
    result = pinned(fake, [0, 1], seen=world)
    assert gpu_scopes(result) == {"GPU 0", "GPU 1"} and result.gpus == 2
    assert find(result, "host-to-device bandwidth", "GPU 1").measured == "52.0 GB/s"
    assert find(result, "p2p").measured == "P2P between 1 of 1 pairs (1 over NVLink)"
    assert find(result, "nvlink links").status == "ok"
    assert find(result, "device-to-device bandwidth").measured == "0->1: 380.0 GB/s"
    assert world == [2] and find(result, "all-reduce busbw").scope == "2 GPUs"
    count = find(result, "gpu count")
    assert (count.status, count.measured, count.expected) == ("ok", "2 visible of 4", "2")
    assert find(result, "interconnect").measured == "NVLink between 1 of 1 pairs"
    assert result.verdict == "go", result.summary
    assert [g["index"] for g in result.facts["gpus"]] == [0, 1] and result.facts["machine_gpus"] == 4
    assert render_text(result).splitlines()[0] == "checking GPUs 0, 1 of 4 (CUDA_VISIBLE_DEVICES)"


def test_uuids_and_a_uuid_prefix_name_gpus_by_their_machine_index(monkeypatch: pytest.MonkeyPatch):
    fake = uuid_box()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{fake.gpus[3].uuid},GPU-1111")  # a UUID, then a prefix
    result = pinned(fake, [3, 1])
    assert gpu_scopes(result) == {"GPU 1", "GPU 3"}
    assert find(result, "host-to-device bandwidth", "GPU 3").status == "ok"
    assert find(result, "device-to-device bandwidth").measured == "1->3: 380.0 GB/s"
    assert find(result, "gpu count").status == "ok"
    assert render_text(result).splitlines()[0] == "checking GPUs 1, 3 of 4 (CUDA_VISIBLE_DEVICES)"


def test_an_entry_naming_no_gpu_is_a_row_and_hides_the_entries_after_it(monkeypatch: pytest.MonkeyPatch):
    """CUDA keeps the entries before the first bad one: GPU 0 only."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,7,1")
    result = pinned(uuid_box(), [0])
    assert gpu_scopes(result) == {"GPU 0"} and not [i for i in result.items if i.name == "p2p"]
    bad = find(result, "cuda_visible_devices")
    assert bad.status == "warn" and bad.measured == "'7' names no GPU of the 4 here, or one named before"
    assert bad.note.endswith("GPUs checked: 0")
    count = find(result, "gpu count")
    assert (count.status, count.measured) == ("fail", "1 visible of 4")
    assert count.note == "fewer visible GPUs than the listing (CUDA_VISIBLE_DEVICES)"
    assert render_text(result).splitlines()[0] == "checking GPU 0 of 4 (CUDA_VISIBLE_DEVICES)"


def test_a_uuid_of_another_machine_leaves_no_gpu_and_says_so(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-ffff")
    result = check(uuid_box(), H200_2X, measure=False)
    assert result.gpus == 0 and not gpu_scopes(result)
    assert find(result, "cuda_visible_devices").measured.startswith("'GPU-ffff' names no GPU")
    assert "no GPU (CUDA_VISIBLE_DEVICES='GPU-ffff' leaves none of this machine's 4 GPUs)" in result.summary
    assert render_text(result).splitlines()[0] == "checking no GPU of 4 (CUDA_VISIBLE_DEVICES)"


def test_more_visible_gpus_than_the_profile_warns_with_the_visible_count(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2,3")
    count = find(pinned(uuid_box(), [1, 2, 3]), "gpu count")
    assert (count.status, count.measured) == ("warn", "3 visible of 4")
    assert count.note == "more visible GPUs than the profile uses (CUDA_VISIBLE_DEVICES)"


def test_unset_checks_every_gpu_and_prints_no_scope_line():
    result = check(uuid_box())
    assert gpu_scopes(result) == {"GPU 0", "GPU 1", "GPU 2", "GPU 3"}
    assert find(result, "gpu count").measured == "4" and result.facts["cuda_visible"] is None
    assert not [i for i in result.items if i.name == "cuda_visible_devices"]
    assert render_text(result).splitlines()[0].split() == ["where", "check", "measured", "expected"]


@pytest.mark.parametrize("width", [80, 100])
def test_the_check_of_a_bad_box_fits_the_terminal(width: int):
    """Every row, its expected figure, its note and the go/no-go paragraph fit the width; a
    log (no width) keeps the wide table, every figure on one row."""
    gpus = _geforce(2)
    gpus[1].processes = [(999_999, 20 * GIB)]
    measured = child_output(gpus, gen=4, h2d=24.0, d2d=20.0, per_gpu={1: {"pcie_width": 4}})
    result = check(FakeNvml(gpus), H200, measured=measured, busbw=18.0)
    assert result.verdict == "no-go"
    text = render_text(result, width)
    assert max(len(line) for line in text.splitlines()) <= width, text
    for item in result.items:  # nothing a row that is not ok says is lost
        if item.status != "ok":
            flat = " ".join(text.split())
            assert item.measured in flat and f"expected {item.expected}" in flat and " ".join(item.note.split()) in flat
    assert "NO-GO: 6 fail" in text
    wide = render_text(result)
    assert any(len(line) > 120 for line in wide.splitlines())
    assert "device-to-device bandwidth" in wide and "GPU-GPU copies" in text


def test_a_healthy_box_fits_80_columns():
    text = render_text(check(FakeNvml(hgx())), 80)
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "\nGO: " in text
