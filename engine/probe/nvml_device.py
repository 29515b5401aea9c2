"""NVML for one rank's own GPU: utilization during the measured steps, and its links.

Runs inside a rank process. Everything here degrades to None ("not available") when NVML or
the device is missing, so the probe runs unchanged on CPU.
"""

from __future__ import annotations

import threading
from typing import Any

from engine import libnvml

SAMPLE_INTERVAL_S = 0.1  # NVML's own utilization is averaged over 1/6 s .. 1 s


def handle_for_cuda_device(index: int) -> tuple[Any, Any] | None:
    """(NVML binding, handle) of torch's cuda:<index>, matched by UUID so that
    CUDA_VISIBLE_DEVICES renumbering cannot point us at another GPU. NVML stays initialised for
    the rank's life."""
    nvml = libnvml.start()
    if nvml is None:
        return None
    try:
        import torch

        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        if uuid is not None:
            text = str(uuid)
            return nvml, nvml.nvmlDeviceGetHandleByUUID(text if text.startswith("GPU-") else f"GPU-{text}")
    except Exception:
        pass
    try:
        return nvml, nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return None


class UtilizationSampler:
    """Samples nvmlDeviceGetUtilizationRates in a thread while the measured steps run.
    A call costs microseconds; at 10 Hz that is far below the probe's 3 % overhead budget."""

    def __init__(self, cuda_index: int | None) -> None:
        self._found = handle_for_cuda_device(cuda_index) if cuda_index is not None else None
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> UtilizationSampler:
        if self._found is not None:
            self._thread = threading.Thread(target=self._run, name="gpu-util", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def _run(self) -> None:
        nvml, handle = self._found  # type: ignore[misc]  # set before the thread starts, never None here
        while not self._stop.is_set():
            try:
                self._samples.append(float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            except Exception:
                return
            self._stop.wait(SAMPLE_INTERVAL_S)

    def mean(self) -> float | None:
        return sum(self._samples) / len(self._samples) if self._samples else None


def link_facts(cuda_index: int) -> dict[str, Any]:
    """Active NVLink links and the PCIe link of one GPU (None where NVML cannot say)."""
    facts: dict[str, Any] = {"nvlink_links": None, "pcie_gen": None, "pcie_width": None}
    found = handle_for_cuda_device(cuda_index)
    if found is None:
        return facts
    nvml, handle = found
    try:
        facts["pcie_gen"] = int(nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle))
        facts["pcie_width"] = int(nvml.nvmlDeviceGetMaxPcieLinkWidth(handle))
    except Exception:
        pass
    active, asked = 0, False
    for link in range(libnvml.const(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except Exception:
            continue  # links past this GPU's count, or no NVLink at all
        asked = True
        active += int(state == libnvml.const(nvml, "NVML_FEATURE_ENABLED", 1))
    facts["nvlink_links"] = active if asked else 0
    return facts
