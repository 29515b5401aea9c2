"""The GPU sources the sampler runs: one line each. A new source (DCGM, rocm-smi) is a class
that matches engine/telemetry/gpu_source.py's GpuSource and one ``register`` line here."""

from __future__ import annotations

from engine.telemetry.gpu_source import GpuSourceRegistry
from engine.telemetry.nvml_source import NvmlSource
from engine.telemetry.triton_metrics import TritonSource

GPU_SOURCES = GpuSourceRegistry()
GPU_SOURCES.register("nvml", NvmlSource.for_settings)  # local GPUs; enumerates them for the rest
GPU_SOURCES.register("triton", TritonSource.for_settings)  # a server's GPUs, local or remote
