"""Which GPUs several Python-backend processes shared without MPS, from NVML's process lists.

Triton's Python backend runs each model instance as its own process (a stub), with its own CUDA
context; a GPU without NVIDIA's Multi-Process Service (MPS) runs one context at a time; under MPS the
contexts share it.
NVML sees the processes only where the server runs on this machine (the embedded server, or a
server on loopback). Pure functions over the recorded GPU readings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

STUB = "triton_python_backend_stub"
MPS_SERVER = "nvidia-cuda-mps"  # nvidia-cuda-mps-server (and -control, which holds no context)


@dataclass(frozen=True)
class GpuSharing:
    index: int
    stubs: int  # the most Python-backend stubs seen on this GPU at once
    mps: bool  # an MPS server held this GPU at some reading


def _base(name: object) -> str:
    """A process name as psutil or NVML gives it (a name, or the executable's path): its last part."""
    return str(name or "").rsplit("/", 1)[-1]


def _is_stub(name: str) -> bool:
    """The Python backend's stub; the kernel keeps 15 characters of a name (its comm)."""
    return name == STUB or (len(name) == 15 and STUB.startswith(name))


def gpu_sharing(samples: Iterable[list[dict[str, Any]]]) -> list[GpuSharing]:
    """Per GPU index, from each sample's readings ({"index", "processes": [{"name", ...}]})."""
    stubs: dict[int, int] = {}
    mps: dict[int, bool] = {}
    for readings in samples:
        for r in readings:
            index = r.get("index")
            if not isinstance(index, int):
                continue
            names = [_base(p.get("name")) for p in r.get("processes") or [] if isinstance(p, dict)]
            stubs[index] = max(stubs.get(index, 0), sum(_is_stub(n) for n in names))
            mps[index] = mps.get(index, False) or any(n.startswith(MPS_SERVER) for n in names)
    return [GpuSharing(i, stubs[i], mps[i]) for i in sorted(stubs)]


def reading_sharing(reading: dict[str, Any]) -> GpuSharing | None:
    """One NVML reading's stubs and MPS server; None where the reading has no process list (a
    source without one, such as Triton's /metrics) or no index. The recording keeps these per
    reading (engine/record/gpu_fields.py), and the summary takes their maximum by SQL."""
    if reading.get("source") != "nvml":
        return None
    found = gpu_sharing([[reading]])
    return found[0] if found else None


def taking_turns(sharing: list[GpuSharing]) -> list[GpuSharing]:
    """The GPUs where two or more stubs held a context at once with no MPS server there."""
    return [g for g in sharing if g.stubs >= 2 and not g.mps]


def sharing_advice(turns: list[GpuSharing], embedded: bool) -> str | None:
    """One recommendation line, or None when no GPU had stubs taking turns."""
    if not turns:
        return None
    where = ", ".join(f"GPU {g.index} ({g.stubs})" for g in turns)
    how = ("set server.mps = \"on\" (nvidia-cuda-mps-control must be on PATH)" if embedded else
           "start the server's processes under an MPS daemon (nvidia-cuda-mps-control -d, with "
           "CUDA_MPS_PIPE_DIRECTORY set for both)")
    return (f"Python-backend instances took turns on {where} stubs at once, without MPS: each is a process "
            f"with its own CUDA context, and a GPU runs one context at a time. Under MPS they share the GPU "
            f"(docs/results/mps_h200.md has what it gained for the embedded ViT): "
            f"{how}, and measure again.")
