"""Shared-memory transports (load.transport), as perf_analyzer's ``--shared-memory system|cuda``.

With ``system_shm`` the request's input tensors are written once into a POSIX shared-memory
segment (/dev/shm) that the server maps; with ``cuda_shm`` into the memory of the first GPU the
model has an instance on, which the server opens through a CUDA IPC handle (the Python backend
then takes the input on the GPU through DLPack, with no host copy). Either way each request is a
small JSON body naming the region, its offset and size: the 602 KB image no longer crosses the
HTTP connection. Outputs go to one system shared-memory region that every request writes into
(perf_analyzer does the same: the values are not read, so their interleaving is harmless);
outputs whose size is not known in advance stay binary in the HTTP response.

Why one GPU's copy and not one per GPU: Triton hands a request to whichever instance is free,
so a copy per GPU (each load worker on one of them) does not keep inputs local; it makes every
batch mix inputs of every GPU. Measured on 2x H200 (bench/transport_vs_perf_analyzer.py,
cuda_shm, 2 rounds each, the same call): a copy per GPU gave 9.8-9.9k images/s at concurrency
128 with 6.1 ms of Triton compute per batch of 15, against perf_analyzer's 13.7-14.2k (its
region lives on GPU 0); one copy on the first GPU gave 14.3-14.4k (1.04-1.08x perf_analyzer)
and 11.6-12.0k at 256 (10.9k with copies per GPU). Re-measured in session 7 (2x H200, 3 rounds,
docs/results/staggered_fidelity_and_cuda_shm_instances_h200.md): at one image per request a copy
per GPU still reads 0.72-0.75x perf_analyzer's one copy; at 32 images per request (4 requests a
batch) it reads 1.05-1.07x, with both GPUs' batches equally fast. So it is the diagnosis knob
``cuda_each``, not the default, until a 4-GPU run says which way it goes there. What made the GPU
holding the one copy slower was its turns with the other GPUs' stubs, which hold a CUDA context
there: under MPS (the embedded server's default on GPUs since session 9) both GPUs finish a batch
in the same 10.2-10.7 ms with one copy (docs/results/mps_h200.md).

The regions are registered with Triton when a sweep starts and unregistered and removed when
it ends, whatever ended it. Segment names start with ``gpuscale-<pid>-``: the embedded server's
guard removes ``/dev/shm/gpuscale-<pid>-*`` if the tool is killed before it can (SIGKILL), and
GPU memory dies with its process. Only a server on this machine can map our memory: a shm
transport with a remote server is refused when the profile is read.

Why not tritonclient.utils.shared_memory / cuda_shared_memory: the regions are written once per
sweep, which the standard library does in a few lines, and the lent GPU machines have no
tritonclient; its CUDA module needs cuda-python's ``cuda.cudart``, which the CUDA 13 images no
longer ship. torch (a dependency already, and there) gives the IPC handle.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from dataclasses import dataclass, field
from typing import Any

from engine.errors import UserError
from engine.load.diagnosis import diagnosis_knobs
from engine.load.http1 import error_message, request
from engine.shm_segments import segment_prefix

SHM_ROOT = "/dev/shm"
TRANSPORTS = ("http", "system_shm", "cuda_shm")
# diagnosis (GPUSCALE_LOAD_DIAG=cuda_gpu=K): cuda_shm's inputs on the model's GPU K instead of
# its first, to tell whether the GPU holding the inputs is the one that works harder;
# cuda_each: a copy on each of the model's GPUs, load worker w using copy w mod N
_DIAG = diagnosis_knobs()
_DIAG_CUDA_GPU = _DIAG.get("cuda_gpu")
_DIAG_CUDA_EACH = "cuda_each" in _DIAG


@dataclass(frozen=True)
class TensorRef:
    """Where a request's tensor lives: a registered region, the offset in it and its size."""

    region: str
    offset: int
    byte_size: int

    def parameters(self) -> dict[str, Any]:
        return {
            "shared_memory_region": self.region,
            "shared_memory_byte_size": self.byte_size,
            "shared_memory_offset": self.offset,
        }


@dataclass
class ShmPlan:
    """What a load worker's requests reference: the input region and the output region."""

    inputs: dict[str, TensorRef]
    outputs: dict[str, TensorRef]


@dataclass
class SharedRegions:
    transport: str
    url: str
    headers: dict[str, str]
    system: list[tuple[str, str]] = field(default_factory=list)  # (region name, /dev/shm segment)
    cuda: list[str] = field(default_factory=list)  # region names
    # once opened: the request plan(s) the load workers send, worker w plans[w mod len]; one
    # plan, except with the diagnosis cuda_each (a copy of the inputs per GPU)
    plans: list[ShmPlan] = field(default_factory=list)
    _keep: list[Any] = field(default_factory=list)  # GPU tensors, alive while registered

    @property
    def plan(self) -> ShmPlan:
        """The first plan: the one every load worker sends outside the diagnosis."""
        return self.plans[0]

    async def close(self) -> None:
        """Unregister every region and remove every segment; never raises (runs in finally)."""
        for name in self.cuda:
            await self._call(f"/v2/cudasharedmemory/region/{name}/unregister", {}, quiet=True)
        for name, segment in self.system:
            await self._call(f"/v2/systemsharedmemory/region/{name}/unregister", {}, quiet=True)
            try:
                os.unlink(os.path.join(SHM_ROOT, segment))
            except OSError:
                pass
        self.cuda.clear()
        self.system.clear()
        self._keep.clear()

    async def _call(self, path: str, body: dict[str, Any], quiet: bool = False) -> None:
        try:
            reply = await request(self.url, path, "POST", json.dumps(body).encode(), self.headers, timeout_s=30.0)
        except (OSError, TimeoutError) as exc:
            if quiet:
                return
            raise UserError(f"shared memory: the server did not answer {path}: {exc}") from None
        if reply.status != 200 and not quiet:
            raise UserError(f"shared memory: the server refused {path.rsplit('/', 2)[-2]!r}: {error_message(reply.body)}")


async def open_regions(
    transport: str,
    url: str,
    headers: dict[str, str],
    inputs: list[tuple[str, bytes]],
    outputs: list[tuple[str, int]],
    gpus: tuple[int, ...] = (),
) -> SharedRegions:
    """Create and register the regions for one sweep. ``inputs``: (name, tensor bytes) of one
    request; ``outputs``: (name, bytes) of the outputs whose size is known. Raises UserError
    (and leaves nothing behind) when the server refuses a region."""
    if transport not in ("system_shm", "cuda_shm"):
        raise ValueError(f"not a shared-memory transport: {transport}")
    if transport == "cuda_shm" and not gpus:
        raise UserError("load.transport = 'cuda_shm' needs the model on a GPU: this config variant has no GPU instance")
    regions = SharedRegions(transport, url, headers)
    tag = secrets.token_hex(3)
    try:
        out_refs: dict[str, TensorRef] = {}
        if outputs:
            name = f"{segment_prefix()}{tag}-out"
            layout, total = _layout(outputs)
            await _system_region(regions, name, b"\0" * total)
            out_refs = {n: TensorRef(name, off, size) for n, (off, size) in layout.items()}
        layout, total = _layout([(n, len(b)) for n, b in inputs])
        blob = b"".join(b for _n, b in inputs)
        if transport == "system_shm":
            name = f"{segment_prefix()}{tag}-in"
            await _system_region(regions, name, blob)
            regions.plans.append(ShmPlan({n: TensorRef(name, off, size) for n, (off, size) in layout.items()}, out_refs))
        else:  # on the first of the model's GPUs: see the module's docstring for why not on each
            first = _DIAG_CUDA_GPU if _DIAG_CUDA_GPU in gpus else gpus[0]
            for gpu in gpus if _DIAG_CUDA_EACH else (first,):
                name = f"{segment_prefix()}{tag}-in-gpu{gpu}"
                base = await _cuda_region(regions, name, blob, gpu)
                regions.plans.append(
                    ShmPlan({n: TensorRef(name, base + off, size) for n, (off, size) in layout.items()}, out_refs))
    except BaseException:
        await regions.close()
        raise
    return regions


def _layout(items: list[tuple[str, int]]) -> tuple[dict[str, tuple[int, int]], int]:
    """Offsets of tensors packed one after the other, each 64-byte aligned."""
    layout: dict[str, tuple[int, int]] = {}
    offset = 0
    for name, size in items:
        layout[name] = (offset, size)
        offset += (size + 63) // 64 * 64
    return layout, max(offset, 64)


async def _system_region(regions: SharedRegions, name: str, data: bytes) -> None:
    path = os.path.join(SHM_ROOT, name)
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    regions.system.append((name, name))  # removed by close() from here on
    try:
        os.ftruncate(fd, max(len(data), 64))
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.pwrite(fd, view[written:], written)
    finally:
        os.close(fd)
    await regions._call(
        f"/v2/systemsharedmemory/region/{name}/register", {"key": f"/{name}", "offset": 0, "byte_size": max(len(data), 64)}
    )


async def _cuda_region(regions: SharedRegions, name: str, data: bytes, gpu: int) -> int:
    """Copy ``data`` to GPU ``gpu`` and register it; returns the data's offset in the region
    (the IPC handle maps the whole allocation the tensor lives in)."""
    try:
        import torch
    except ImportError:
        raise UserError("load.transport = 'cuda_shm' needs torch with CUDA on this machine") from None
    if not torch.cuda.is_available() or gpu >= torch.cuda.device_count():
        raise UserError(f"load.transport = 'cuda_shm': GPU {gpu} is not visible to this process")
    host = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    tensor = torch.empty(len(data), dtype=torch.uint8, device=f"cuda:{gpu}")
    tensor.copy_(host)
    torch.cuda.synchronize(gpu)
    regions._keep.append(tensor)
    device, handle, size, offset, *_ = tensor.untyped_storage()._share_cuda_()
    regions.cuda.append(name)
    await regions._call(
        f"/v2/cudasharedmemory/region/{name}/register",
        {"raw_handle": {"b64": base64.b64encode(ipc_mem_handle(handle)).decode()}, "device_id": gpu,
         "byte_size": int(offset) + len(data)},
    )
    return int(offset)


IPC_HANDLE_SIZE = 64  # sizeof(cudaIpcMemHandle_t)


def ipc_mem_handle(shared: bytes) -> bytes:
    """The cudaIpcMemHandle_t inside torch's storage handle. torch 2.x writes
    ``[version][type]['c': the 64-byte handle of a cudaMalloc block | 'e': an expandable
    segment]``; older torch wrote the bare 64 bytes. Triton wants the bare handle (measured on
    H200: the versioned form is refused as "not a valid base64 encoded cudaIpcMemHandle_t")."""
    if len(shared) == IPC_HANDLE_SIZE:
        return shared
    if len(shared) == IPC_HANDLE_SIZE + 2 and shared[1:2] == b"c":
        return shared[2:]
    if len(shared) >= 2 and shared[1:2] == b"e":
        raise UserError("load.transport = 'cuda_shm' cannot share torch's expandable segments: unset "
                        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments for this run")
    raise UserError(f"load.transport = 'cuda_shm': unknown CUDA IPC handle layout from torch ({len(shared)} bytes)")
