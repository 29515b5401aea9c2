"""The GPU-box check's verdict logic (gpu_run.analyse) on constructed event streams, so that
the lead's scarce device time is not spent finding a bug in the checker itself."""

from __future__ import annotations

from engine.events import GpuReading, GpuSample, Topology
from tests.engine.telemetry.gpu_run import analyse

T0 = 1_000.0
WORLD = 4
AR_BYTES, COPY_BYTES = 256 << 20, 128 << 20


def _record(iters: int = 1000) -> dict:
    runs = [
        {"rank": r, "pid": 100 + r, "start": T0 + 10, "end": T0 + 30, "iters": iters,
         "allreduce_bytes": AR_BYTES, "copy_bytes": COPY_BYTES, "world": WORLD}
        for r in range(WORLD)
    ]
    return {"spawned_at": T0 + 5, "runs": runs}


def _events(record: dict, nvlink_scale: float = 1.0) -> list[dict]:
    run = record["runs"][0]
    elapsed = run["end"] - run["start"]
    ring = run["iters"] * AR_BYTES * 2 * (WORLD - 1) / WORLD / elapsed
    copies = run["iters"] * COPY_BYTES / elapsed
    topo = Topology(
        gpus=[{"uuid": f"GPU-{i}", "index": i, "name": "NVIDIA H200", "nvlink_links_up": 18} for i in range(WORLD)],
        summary="4x NVIDIA H200, NVLink x18 between every pair (NVSwitch)", ts=T0,
    )
    events = [topo.to_dict()]
    t = T0 + 0.5
    while t < T0 + 36:
        busy = run["start"] <= t <= run["end"]
        gpus = [
            GpuReading(
                uuid=f"GPU-{i}", index=i, source="nvml", util_gpu=99.0 if busy else 0.0,
                power_w=600.0 if busy else 90.0, mem_used=(3 << 30) if busy else (1 << 29),
                energy_j=1e5 + t * 100, nvlink_tx_bps=ring * nvlink_scale if busy else 0.0,
                nvlink_rx_bps=ring * nvlink_scale if busy else 0.0, pcie_tx_bps=copies if busy else 0.0,
                pcie_rx_bps=copies if busy else 0.0,
                processes=[{"pid": 100 + i, "name": "python", "mem_used": 1 << 30}] if busy else [],
            )
            for i in range(WORLD)
        ]
        events.append(GpuSample(gpus=gpus, source="nvml", interval_s=0.5, ts=t).to_dict())
        t += 0.5
    return events


def test_consistent_telemetry_passes_every_check():
    record = _record()
    lines, checks = analyse(_events(record), record, 0.5)
    failed = [text for ok, text in checks if not ok]
    assert failed == []
    assert len(lines) == WORLD and "NVLink tx" in lines[0]
    assert sum("NVLink tx" in text for _, text in checks) == WORLD


def test_nvlink_read_from_one_link_only_is_caught():
    record = _record()
    _, checks = analyse(_events(record, nvlink_scale=1 / 18), record, 0.5)  # the scopeId-0 mistake
    failed = [text for ok, text in checks if not ok]
    assert len(failed) == WORLD and all("NVLink tx" in text for text in failed)


def test_missing_topology_and_samples_fail():
    record = _record()
    _, checks = analyse([], record, 0.5)
    assert [ok for ok, _ in checks] == [False, False]
