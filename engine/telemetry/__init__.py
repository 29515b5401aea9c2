"""GPU and host telemetry: GPU sources from a registry (local GPUs through NVML, a server's
GPUs through Triton's /metrics), host CPU/memory/network through psutil. Everything leaves as
events (GpuSample, HostSample, Topology, Warning); every blocking call runs in the sampler's
own threads.

Import cost is kept low on purpose: NVML's binding is loaded only when a source opens it
(engine/libnvml.py), and nothing here imports textual or tritonclient (the GPU boxes do not
have them).
"""
