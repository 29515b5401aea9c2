"""GPU and host telemetry: local GPUs through NVML, remote GPUs through Triton's /metrics,
host CPU/memory/network through psutil. Everything leaves as events (GpuSample, HostSample,
Topology, Warning); every blocking call runs in the sampler's own threads.

Import cost is kept low on purpose: pynvml is imported only when NVML sampling starts, and
nothing here imports textual or tritonclient (the GPU boxes do not have them).
"""
