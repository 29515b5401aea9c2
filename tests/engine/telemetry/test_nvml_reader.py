"""The NVML reader's logic on a stand-in binding: units, rates, and degradation rules."""

from __future__ import annotations

import os

import pytest

from engine import libnvml
from engine.events import Warning
from engine.telemetry.nvml_gpus import NvmlGpus
from engine.telemetry.once import WarnOnce
from tests.engine.telemetry.fake_nvml import FakeGpu, FakeLink, FakeNvml


def _open(fake: FakeNvml) -> tuple[NvmlGpus, list[Warning]]:
    events: list[Warning] = []
    gpus = NvmlGpus(WarnOnce(events.append), nvml=fake)
    assert gpus.open()
    return gpus, events


def _two_gpus(**kw) -> list[FakeGpu]:
    return [FakeGpu(0, "GPU-aaaa", pci=(0, 0x18, 0), **kw), FakeGpu(1, "GPU-bbbb", pci=(0, 0x2A, 0), **kw)]


def test_units_are_converted_to_the_contract():
    g = FakeGpu(0, "GPU-aaaa", processes=[(os.getpid(), 512 << 20)])
    gpus, warnings = _open(FakeNvml([g]))
    (r,) = gpus.read()
    assert (r.uuid, r.index, r.source, r.name, r.bus_id) == ("GPU-aaaa", 0, "nvml", "NVIDIA H200", "00000000:18:00.0")
    assert (r.util_gpu, r.util_mem) == (50.0, 20.0)
    assert (r.mem_used, r.mem_total) == (10 << 30, 141 << 30)
    assert r.power_w == 350.0 and r.power_limit_w == 700.0  # mW -> W
    assert r.energy_j == pytest.approx(123_456.789)  # mJ -> J
    assert (r.temp_c, r.sm_clock_mhz, r.pcie_gen, r.pcie_width) == (45.0, 1980.0, 5, 16)
    assert r.pcie_tx_bps == 1000 * 1024 and r.pcie_rx_bps == 2000 * 1024  # KB/s -> B/s
    assert r.nvlink_tx_bps is None and r.nvlink_rx_bps is None  # no links: nothing to report
    assert r.processes == [{"pid": os.getpid(), "name": r.processes[0]["name"], "mem_used": 512 << 20}]
    assert r.processes[0]["name"]  # our own pid: psutil names it
    assert warnings == []


def test_nvlink_rate_from_cumulative_kib_over_all_links():
    links = [FakeLink(remote_pci=(0, 0x2A, 0)) for _ in range(4)]
    g = FakeGpu(0, "GPU-aaaa", links=links)
    gpus, _ = _open(FakeNvml([g, FakeGpu(1, "GPU-bbbb", pci=(0, 0x2A, 0))]))
    first = gpus.read()[0]
    assert first.nvlink_tx_bps is None  # first reading is only the baseline
    for i, link in enumerate(links):  # 0.5 s later, every link moved some data
        link.tx_kib += 1000 * (i + 1)
        link.rx_kib += 500
    g.clock_us += 500_000
    r = gpus.read()[0]
    assert r.nvlink_tx_bps == pytest.approx((1000 + 2000 + 3000 + 4000) * 1024 / 0.5)
    assert r.nvlink_rx_bps == pytest.approx(4 * 500 * 1024 / 0.5)


def test_nvlink_falls_back_to_per_link_sum_when_aggregate_scope_is_rejected():
    links = [FakeLink(remote_pci=(0, 0x2A, 0)) for _ in range(3)]
    g = FakeGpu(0, "GPU-aaaa", links=links)
    gpus, warnings = _open(FakeNvml([g], aggregate_scope=False))
    gpus.read()
    for link in links:
        link.tx_kib += 2048
    g.clock_us += 1_000_000
    r = gpus.read()[0]
    assert r.nvlink_tx_bps == pytest.approx(3 * 2048 * 1024)
    assert r.nvlink_rx_bps == 0.0
    assert warnings == []


def test_counter_going_backwards_gives_none_not_a_negative_rate():
    links = [FakeLink(remote_pci=(0, 0x2A, 0), tx_kib=10_000)]
    g = FakeGpu(0, "GPU-aaaa", links=links)
    gpus, _ = _open(FakeNvml([g]))
    gpus.read()
    links[0].tx_kib = 5  # driver reloaded: counters restart
    g.clock_us += 1_000_000
    assert gpus.read()[0].nvlink_tx_bps is None


def test_unsupported_field_is_none_with_one_warning_for_all_gpus_and_samples():
    fake = FakeNvml(_two_gpus(unsupported={"nvmlDeviceGetPowerUsage"}))
    gpus, warnings = _open(fake)
    for _ in range(5):
        readings = gpus.read()
        assert [r.power_w for r in readings] == [None, None]
        assert [r.util_gpu for r in readings] == [50.0, 50.0]  # the rest still flows
    assert len(warnings) == 1
    assert warnings[0].key == "nvml-unsupported:power_w"
    assert "GPU 0" in warnings[0].message and "GPU 1" in warnings[0].message
    # not asked again after the first NotSupported
    assert fake.calls.count("nvmlDeviceGetPowerUsage") == 2


def test_mig_is_named_in_the_unsupported_warning():
    fake = FakeNvml([FakeGpu(0, "GPU-aaaa", mig=True, unsupported={"nvmlDeviceGetUtilizationRates"})])
    gpus, warnings = _open(fake)
    r = gpus.read()[0]
    assert r.util_gpu is None and r.util_mem is None
    assert len(warnings) == 1 and "MIG" in warnings[0].message


def test_gpu_lost_mid_run_gives_none_and_one_warning_and_the_others_go_on():
    devices = _two_gpus()
    gpus, warnings = _open(FakeNvml(devices))
    assert all(r.util_gpu == 50.0 for r in gpus.read())
    devices[1].lost = True
    for _ in range(3):
        ok, lost = gpus.read()
        assert ok.util_gpu == 50.0 and ok.power_w == 350.0
        assert (lost.uuid, lost.index, lost.name) == ("GPU-bbbb", 1, "NVIDIA H200")  # still listed, as n/a
        values = [getattr(lost, f) for f in ("util_gpu", "mem_used", "power_w", "temp_c", "pcie_tx_bps", "energy_j")]
        assert values == [None] * 6
    assert [w.key for w in warnings] == ["nvml-lost:GPU-bbbb"]
    assert "lost" in warnings[0].message


def test_memory_v2_falls_back_to_v1_on_an_old_driver():
    g = FakeGpu(0, "GPU-aaaa", unsupported={"nvmlDeviceGetMemoryInfo_v2"})
    gpus, warnings = _open(FakeNvml([g]))
    r = gpus.read()[0]
    assert (r.mem_used, r.mem_total) == (g.mem_used, g.mem_total)
    assert warnings == []


def test_gpu_without_uuid_is_keyed_by_bus_id():
    g = FakeGpu(0, "", unsupported={"nvmlDeviceGetUUID"})
    gpus, _ = _open(FakeNvml([g]))
    assert gpus.read()[0].uuid == "pci:00000000:18:00.0"


@pytest.mark.parametrize(
    "code, phrase",
    [
        (libnvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver"),
        (libnvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver not loaded"),
        (libnvml.NVML_ERROR_NO_PERMISSION, "no permission"),
    ],
)
def test_init_failure_is_one_warning_and_no_devices(code, phrase):
    events: list[Warning] = []
    gpus = NvmlGpus(WarnOnce(events.append), nvml=FakeNvml([], init_error=code))
    assert gpus.open() is False
    assert gpus.devices == []
    assert len(events) == 1 and phrase in events[0].message


def test_no_gpu_found_is_one_warning_and_nvml_is_shut_down():
    events: list[Warning] = []
    fake = FakeNvml([])
    gpus = NvmlGpus(WarnOnce(events.append), nvml=fake)
    assert gpus.open() is False
    assert [e.key for e in events] == ["nvml-no-gpu"]
    assert fake.shutdown_called


def test_without_the_nvml_library_the_binding_is_not_imported_and_the_warning_is_the_same(monkeypatch) -> None:
    """No libnvidia-ml.so.1 (a CPU box): NVML cannot start, said in nvmlInit's own words, and
    pynvml (40 ms of import) is not imported for it."""
    monkeypatch.setattr(libnvml, "_library_loads", lambda: False)
    monkeypatch.setattr(libnvml, "_binding_installed", lambda: True)

    def no_import() -> None:
        raise AssertionError("pynvml imported")

    monkeypatch.setattr(libnvml, "_pynvml", no_import)
    events: list[Warning] = []
    assert NvmlGpus(WarnOnce(events.append)).open() is False
    assert [(e.key, e.message) for e in events] == [
        ("nvml-unavailable", "NVML unavailable (no NVIDIA driver: libnvidia-ml.so.1 not found): local GPU values are n/a")]
    assert libnvml.start() is None
