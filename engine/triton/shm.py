"""Shared-memory regions for the system_shm and cuda_shm transports, as perf_analyzer's
``--shared-memory system|cuda``.

The requests' input tensors are written once per sweep into a POSIX shared-memory segment
(/dev/shm) the server maps, or into the memory of one GPU, which the server opens through a CUDA
IPC handle; each request is then a small JSON body naming the region, its offset and size. With
input data every request's tensors are in the one region, one after the other; past
MAX_REGION_BYTES the sweep is refused before any region is made.
Outputs go to one system region every request writes into (perf_analyzer does the same: the
values are not read); outputs whose size is not known in advance stay in the HTTP response.
CUDA inputs live on the model's first GPU only: why, and what a copy per GPU measured, is in
docs/results/load_engine_design_notes.md.

The regions are registered when a sweep starts and unregistered and removed when it ends,
whatever ended it. Segment names start with ``gpuscale-<pid>-``: the embedded server's guard
removes those of a tool killed before it could, and GPU memory dies with its process. Only a
server on this machine can map our memory (the TRANSPORTS table marks these local_only).
Not tritonclient's shared-memory modules: the standard library does this in a few lines, and
torch (already a dependency) gives the IPC handle where tritonclient needs cuda-python.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from dataclasses import dataclass, field
from typing import Any

from engine.errors import UserError
from engine.net.http1 import BadResponse, error_message, request
from engine.shm_segments import segment_prefix

SHM_ROOT = "/dev/shm"


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


MAX_REGION_BYTES = 2 << 30  # the input region, every request's tensors together


@dataclass
class ShmPlan:
    """What a load worker's requests reference: the input region and the output region."""

    inputs: dict[str, TensorRef]  # the first request's inputs
    outputs: dict[str, TensorRef]
    requests: list[dict[str, TensorRef]] = field(default_factory=list)  # every request's inputs (empty: ``inputs``)

    def request_inputs(self, request: int) -> dict[str, TensorRef]:
        return self.requests[request] if self.requests else self.inputs


def region_bytes(requests: list[list[tuple[str, int]]]) -> int:
    """The input region's size for these requests' (name, bytes) tensors, 64-byte aligned each.
    Pure: nothing is allocated."""
    return max(64, sum((size + 63) // 64 * 64 for tensors in requests for _name, size in tensors))


@dataclass
class SharedRegions:
    url: str
    headers: dict[str, str]
    system: list[tuple[str, str]] = field(default_factory=list)  # (region name, /dev/shm segment)
    cuda: list[str] = field(default_factory=list)  # region names
    plan: ShmPlan | None = None  # once opened: what every load worker's requests name
    _keep: list[Any] = field(default_factory=list)  # GPU tensors, alive while registered
    _counters: list[tuple[bytes, int]] = field(default_factory=list)  # their IPC ref counters (torch's)

    async def close(self) -> None:
        """Unregister every region and remove every segment, then give the GPU memory back;
        never raises (runs in finally)."""
        released = True
        for name in self.cuda:
            released = await self._call(f"/v2/cudasharedmemory/region/{name}/unregister", {}, quiet=True) and released
        for name, segment in self.system:
            await self._call(f"/v2/systemsharedmemory/region/{name}/unregister", {}, quiet=True)
            try:
                os.unlink(os.path.join(SHM_ROOT, segment))
            except OSError:
                pass
        self.cuda.clear()
        self.system.clear()
        if released:  # the server no longer maps our GPU memory (or is gone)
            release_cuda(self._keep, self._counters)
        self._keep.clear()

    async def _call(self, path: str, body: dict[str, Any], quiet: bool = False) -> bool:
        """POST to the server; with ``quiet``, failures are not raised: True when the server
        answered (any status) or nothing listens any more, False when it may still be there."""
        try:
            reply = await request(self.url, path, "POST", json.dumps(body).encode(), self.headers, timeout_s=30.0)
        except (OSError, TimeoutError, BadResponse) as exc:
            if quiet:
                return isinstance(exc, ConnectionRefusedError)
            raise UserError(f"shared memory: the server did not answer {path}: {exc}") from None
        if reply.status != 200 and not quiet:
            raise UserError(f"shared memory: the server refused {path.rsplit('/', 2)[-2]!r}: {error_message(reply.body)}")
        return True


def release_cuda(tensors: list[Any], counters: list[tuple[bytes, int]]) -> None:
    """Free shared GPU tensors now. torch counts the users of each block it shares in a counter
    that only a torch consumer decrements; Triton is none, so a freed block would wait in torch's
    limbo until exit, which then warns "Producer process has been terminated before all shared
    CUDA tensors released". Once the server has unregistered the region, our count is the last:
    drop it, free the tensors and collect. Best effort: never raises."""
    if not tensors and not counters:
        return
    import torch

    for handle, offset in counters:
        try:
            torch.UntypedStorage._release_ipc_counter_cuda(handle, offset)
        except Exception:  # noqa: BLE001 - best effort, as torch's own consumers do
            pass
    counters.clear()
    tensors.clear()
    try:
        torch.cuda.ipc_collect()
    except Exception:  # noqa: BLE001 - no CUDA left to collect from
        pass


def check_region_size(requests: list[list[tuple[str, int]]]) -> None:
    total = region_bytes(requests)
    if total > MAX_REGION_BYTES:
        raise UserError(f"shared memory: the {len(requests)} requests' inputs need {total / (1 << 30):.1f} GiB, over "
                        f"the limit of {MAX_REGION_BYTES >> 30} GiB (use fewer input data entries, a smaller batch "
                        "size, or load.transport = 'http')")


@dataclass(frozen=True)
class CudaPlace:
    """Where a sweep's inputs go in CUDA memory: allocated on ``device`` as this process numbers
    the GPUs, registered under ``device_id`` as the server numbers them."""

    device: int
    device_id: int


def cuda_place(model_gpus: tuple[int, ...], server_gpu: int | None = None) -> CudaPlace | None:
    """The inputs on the first GPU the server's model has instances on (``model_gpus``, our
    numbering), as a client on that box would put them; None: the model has no GPU.
    ``server_gpu``: the server's own number for that GPU when it differs from ours (a server
    pinned to one GPU by CUDA_VISIBLE_DEVICES sees it as its GPU 0); None: it sees what we see.
    A pinned server asked to open device 1, which it does not have, died of SIGSEGV."""
    if not model_gpus:
        return None
    device = model_gpus[0]
    return CudaPlace(device, device if server_gpu is None else server_gpu)


async def open_regions(
    url: str,
    headers: dict[str, str],
    inputs: list[tuple[str, bytes]] | list[list[tuple[str, bytes]]],
    outputs: list[tuple[str, int]],
    gpu: CudaPlace | None = None,
) -> SharedRegions:
    """Create and register the regions for one sweep: the inputs and outputs in system shared
    memory, or in CUDA memory placed at ``gpu``. ``inputs``: (name, tensor bytes) of one request, or a list of those, one per
    request; ``outputs``: (name, bytes) of the outputs whose size is known. Raises UserError (and
    leaves nothing behind) when the inputs are too large or the server refuses a region."""
    requests: list[list[tuple[str, bytes]]] = (
        inputs if inputs and isinstance(inputs[0], list) else [inputs]  # type: ignore[list-item]
    )
    check_region_size([[(n, len(b)) for n, b in tensors] for tensors in requests])
    regions = SharedRegions(url, headers)
    tag = secrets.token_hex(3)
    try:
        out_refs: dict[str, TensorRef] = {}
        if outputs:  # beside the inputs: on their GPU over cuda_shm, as perf_analyzer's --shared-memory cuda
            name = f"{segment_prefix()}{tag}-out" + (f"-gpu{gpu.device}" if gpu is not None else "")
            layout, total = _layout(outputs)
            out_base = 0
            if gpu is None:
                await _system_region(regions, name, b"\0" * total)
            else:
                out_base = await _cuda_region(regions, name, b"\0" * total, gpu)
            out_refs = {n: TensorRef(name, out_base + off, size) for n, (off, size) in layout.items()}
        placed = [(k, n, b) for k, tensors in enumerate(requests) for n, b in tensors]
        layout, total = _layout([((k, n), len(b)) for k, n, b in placed])
        blob = b"".join(b + bytes(-len(b) % 64) for _k, _n, b in placed)
        base = 0
        if gpu is None:
            name = f"{segment_prefix()}{tag}-in"
            await _system_region(regions, name, blob)
        else:
            name = f"{segment_prefix()}{tag}-in-gpu{gpu.device}"
            base = await _cuda_region(regions, name, blob, gpu)
        refs: list[dict[str, TensorRef]] = [{} for _ in requests]
        for (k, n), (off, size) in layout.items():
            refs[k][n] = TensorRef(name, base + off, size)
        regions.plan = ShmPlan(refs[0], out_refs, refs)
    except BaseException:
        await regions.close()
        raise
    return regions


def _layout(items: list[tuple[Any, int]]) -> tuple[dict[Any, tuple[int, int]], int]:
    """Offsets of tensors packed one after the other, each 64-byte aligned."""
    layout: dict[Any, tuple[int, int]] = {}
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


def torch_cuda_here() -> bool:
    """torch imports here and sees a CUDA GPU: what cuda_shm copies the inputs with."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken torch install is a torch that is not here
        return False


async def _cuda_region(regions: SharedRegions, name: str, data: bytes, place: CudaPlace) -> int:
    """Copy ``data`` to the GPU ``place`` names and register it under the server's number for
    that GPU; returns the data's offset in the region (the IPC handle maps the whole allocation
    the tensor lives in)."""
    gpu = place.device
    try:
        import torch
    except ImportError:
        raise UserError("load.transport = 'cuda_shm' needs torch with CUDA: pip install 'gpuscale-tui[probe]'") from None
    if not torch.cuda.is_available() or gpu >= torch.cuda.device_count():
        raise UserError(f"load.transport = 'cuda_shm': GPU {gpu} is not visible to this process")
    host = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    tensor = torch.empty(len(data), dtype=torch.uint8, device=f"cuda:{gpu}")
    tensor.copy_(host)
    torch.cuda.synchronize(gpu)
    regions._keep.append(tensor)
    _device, handle, _size, offset, counter, counter_offset, *_ = tensor.untyped_storage()._share_cuda_()
    regions._counters.append((counter, int(counter_offset)))
    regions.cuda.append(name)
    await regions._call(
        f"/v2/cudasharedmemory/region/{name}/register",
        {"raw_handle": {"b64": base64.b64encode(ipc_mem_handle(handle)).decode()}, "device_id": place.device_id,
         "byte_size": int(offset) + len(data)},
    )
    return int(offset)


IPC_HANDLE_SIZE = 64  # sizeof(cudaIpcMemHandle_t)


def ipc_mem_handle(shared: bytes) -> bytes:
    """The cudaIpcMemHandle_t inside torch's storage handle. torch 2.x writes
    ``[version][type]['c': the 64-byte handle of a cudaMalloc block | 'e': an expandable
    segment]``; older torch wrote the bare 64 bytes. Triton wants the bare handle (it refuses
    the versioned form as "not a valid base64 encoded cudaIpcMemHandle_t")."""
    if len(shared) == IPC_HANDLE_SIZE:
        return shared
    if len(shared) == IPC_HANDLE_SIZE + 2 and shared[1:2] == b"c":
        return shared[2:]
    if len(shared) >= 2 and shared[1:2] == b"e":
        raise UserError("load.transport = 'cuda_shm' cannot share torch's expandable segments: unset "
                        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments for this run")
    raise UserError(f"load.transport = 'cuda_shm': unknown CUDA IPC handle layout from torch ({len(shared)} bytes)")
