"""Local GPUs through NVML as a GpuSource: the readings of NvmlGpus, the topology once at open."""

from __future__ import annotations

import time

from engine.events import GpuReading
from engine.telemetry.gpu_source import GpuSource, SourceContext, TelemetrySettings
from engine.telemetry.nvml_gpus import NvmlGpus
from engine.telemetry.topology import read_topology


class NvmlSource(GpuSource):
    name = "nvml"
    # the energy counter read after the last level's end: its J/image needs it
    # (docs/results/telemetry_notes.md)
    read_at_stop = True
    enumerates_gpus = True

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._gpus: NvmlGpus | None = None

    @classmethod
    def for_settings(cls, settings: TelemetrySettings) -> NvmlSource | None:
        return cls(settings.nvml_interval_s) if settings.use_nvml else None

    def open(self, ctx: SourceContext) -> bool:
        gpus = self._gpus = NvmlGpus(ctx.warn)
        if not gpus.open():
            return False
        ctx.identity.offer(gpus.identity())
        try:
            ctx.publish(read_topology(gpus.nvml, gpus.devices, ts=time.time()))
        except Exception as exc:
            ctx.warn("topology", f"GPU topology could not be read ({exc!r}): scaling explanations lack it")
        gpus.read()  # baseline for the counters that give rates (NVLink)
        return True

    def read(self) -> list[GpuReading] | None:
        return self._gpus.read() if self._gpus is not None else None

    def close(self) -> None:
        if self._gpus is not None:
            self._gpus.close()
