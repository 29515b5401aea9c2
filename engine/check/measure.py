"""The check's measurements that need CUDA, in a child process: ``python -m engine.check.measure``.

A child keeps torch and its CUDA contexts out of the caller (a session serves on these GPUs
next), and a hung driver call out of reach of a timeout. It prints one JSON line on stdout:
per GPU (by UUID) host-to-device GB/s and what NVML read while the GPU was under load (PCIe
links train down when idle, so the link is read during the copies; throttling and
temperature during a short matmul burst), per ordered pair the device-to-device GB/s.
Without torch or CUDA the line says why, and the exit status is still 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

from engine.probe.worker import FORCED_ENV

COPY_BYTES = 256 << 20
SAMPLE_S = 0.01
GB = 1e9


class LoadSampler:
    """Reads NVML for some GPUs every 10 ms while a load runs; keeps what the verdicts use."""

    def __init__(self, found: dict[int, tuple[Any, Any]]) -> None:
        self.found = found  # torch index -> (pynvml, handle)
        self.seen: dict[int, dict[str, Any]] = {i: {} for i in found}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="check-nvml", daemon=True)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            for index, (nv, handle) in self.found.items():
                self._sample(self.seen[index], nv, handle)
            self._stop.wait(SAMPLE_S)

    @staticmethod
    def _sample(into: dict[str, Any], nv: Any, handle: Any) -> None:
        def keep_max(key: str, fn: str, *args: Any, scale: float = 1.0) -> None:
            try:
                value = getattr(nv, fn)(handle, *args)
                value = value * scale if scale != 1.0 else int(value)  # link gen/width stay ints
            except Exception:
                return
            into[key] = value if into.get(key) is None else max(into[key], value)

        keep_max("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration")
        keep_max("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth")
        keep_max("temp_c_max", "nvmlDeviceGetTemperature", 0)  # NVML_TEMPERATURE_GPU
        keep_max("power_w_max", "nvmlDeviceGetPowerUsage", scale=1e-3)
        keep_max("sm_clock_mhz_max", "nvmlDeviceGetClockInfo", 1)  # NVML_CLOCK_SM
        for fn in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            try:
                bits = int(getattr(nv, fn)(handle))
            except Exception:
                continue
            into["throttle_reasons"] = into.get("throttle_reasons", 0) | bits
            break


def _h2d_gbps(torch: Any, index: int, seconds: float) -> float:
    device = torch.device("cuda", index)
    host = torch.empty(COPY_BYTES, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(COPY_BYTES, dtype=torch.uint8, device=device)
    with torch.cuda.device(device):
        for _ in range(2):  # warm-up: first copies pay for mappings
            dev.copy_(host, non_blocking=True)
        torch.cuda.synchronize(device)
        copies, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(4):
                dev.copy_(host, non_blocking=True)
            copies += 4
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - start
    del host, dev
    return copies * COPY_BYTES / elapsed / GB


def _d2d_gbps(torch: Any, a: int, b: int, seconds: float) -> float:
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=torch.device("cuda", a))
    dst = torch.empty(COPY_BYTES, dtype=torch.uint8, device=torch.device("cuda", b))
    for _ in range(2):
        dst.copy_(src)
    torch.cuda.synchronize(a)
    torch.cuda.synchronize(b)
    copies, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(4):
            dst.copy_(src, non_blocking=True)
        copies += 4
        torch.cuda.synchronize(a)
        torch.cuda.synchronize(b)
    elapsed = time.perf_counter() - start
    del src, dst
    return copies * COPY_BYTES / elapsed / GB


def _matmul_burst(torch: Any, count: int, seconds: float) -> None:
    """Every GPU at once: heat, power and clocks under compute, for the throttle check."""
    n = 8192
    mats = []
    for i in range(count):
        device = torch.device("cuda", i)
        mats.append((torch.randn(n, n, device=device, dtype=torch.bfloat16),
                     torch.randn(n, n, device=device, dtype=torch.bfloat16)))
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(8):
            for a, b in mats:
                torch.matmul(a, b)
        for i in range(count):
            torch.cuda.synchronize(i)
    del mats


def measure(h2d_s: float, d2d_s: float, burn_s: float, log: Any = sys.stderr) -> dict[str, Any]:
    os.environ.update(FORCED_ENV)
    try:
        import torch
    except ImportError:
        return {"error": "torch is not installed (pip install 'gpuscale-tui[probe]'): bandwidth and load not measured"}
    if not torch.cuda.is_available():
        return {"error": "torch sees no CUDA device: bandwidth and load not measured"}
    from engine.probe.nvml_device import handle_for_cuda_device

    count = torch.cuda.device_count()
    found = {i: h for i in range(count) if (h := handle_for_cuda_device(i)) is not None}
    uuids = []
    for i in range(count):
        uuid = getattr(torch.cuda.get_device_properties(i), "uuid", None)
        text = str(uuid) if uuid is not None else ""
        uuids.append(text if not text or text.startswith("GPU-") else f"GPU-{text}")
    gpus: list[dict[str, Any]] = [{"index": i, "uuid": uuids[i]} for i in range(count)]
    for i in range(count):
        print(f"check: host-to-device on GPU {i}", file=log, flush=True)
        with LoadSampler({i: found[i]} if i in found else {}) as sampler:
            gpus[i]["h2d_gbps"] = _h2d_gbps(torch, i, h2d_s)
        gpus[i]["copy_load"] = sampler.seen.get(i, {})
    print(f"check: matmul burst on {count} GPU(s)", file=log, flush=True)
    with LoadSampler(found) as sampler:
        _matmul_burst(torch, count, burn_s)
    for i in range(count):
        gpus[i]["compute_load"] = sampler.seen.get(i, {})
    pairs = []
    for a in range(count):
        for b in range(a + 1, count):  # one direction per pair: the link is symmetric
            print(f"check: device-to-device {a}->{b}", file=log, flush=True)
            pairs.append({"a": a, "b": b, "d2d_gbps": _d2d_gbps(torch, a, b, d2d_s),
                          "peer_access": bool(torch.cuda.can_device_access_peer(a, b))})
    return {"gpus": gpus, "pairs": pairs, "torch": torch.__version__}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.check.measure")
    parser.add_argument("--h2d-seconds", type=float, default=1.0)
    parser.add_argument("--d2d-seconds", type=float, default=0.5)
    parser.add_argument("--burn-seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    try:
        result = measure(args.h2d_seconds, args.d2d_seconds, args.burn_seconds)
    except Exception as exc:  # a CUDA error: the caller shows it as the reason, one line
        result = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
