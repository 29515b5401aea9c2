"""How the embedded ViT (vit_model.py) turns Triton's requests into batches on a device.

* Staging: each request's input is copied once into a preallocated buffer of max_batch_size
  images (pinned host memory when a GPU runs the model), then one host-to-device copy moves the
  batch. Inputs that already live on a GPU (CUDA shared memory) are copied device-to-device,
  from another GPU as a peer copy. No per-request concatenation, no allocation per batch.
* Buckets: a batch of n runs at the smallest bucket >= n (powers of two, then max_batch_size),
  so a CUDA graph captured once per bucket at start-up serves every batch size.
* The forward takes the FP32 staging buffer and converts to the model's dtype on the device, so
  the wire and the host-to-device copy carry the bytes the client sent, and the conversion is
  part of the captured graph.

Imports only torch: unit-tested on a CPU (tests/model_repository/test_vit_batching.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

RUNNER_MODES = ("eager", "graph", "compile")


def bucket_sizes(max_batch: int) -> tuple[int, ...]:
    """1, 2, 4, ... below max_batch, then max_batch: padding never more than doubles a batch."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be at least 1, found {max_batch}")
    sizes, size = [], 1
    while size < max_batch:
        sizes.append(size)
        size *= 2
    return (*sizes, max_batch)


def parse_buckets(text: str, max_batch: int) -> tuple[int, ...]:
    """A config's "1,2,4,...": sorted, unique, within 1..max_batch; max_batch is always added
    (every batch Triton can form must fit a bucket). Empty text: bucket_sizes(max_batch)."""
    if not text.strip():
        return bucket_sizes(max_batch)
    try:
        sizes = {int(x) for x in text.replace(" ", "").split(",") if x}
    except ValueError:
        raise ValueError(f"batch_buckets must be integers separated by commas, found {text!r}") from None
    if any(s < 1 or s > max_batch for s in sizes):
        raise ValueError(f"batch_buckets must lie within 1..{max_batch}, found {text!r}")
    return tuple(sorted(sizes | {max_batch}))


def choose_bucket(n: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds a batch of n."""
    for size in buckets:
        if size >= n >= 1:
            return size
    raise ValueError(f"a batch of {n} fits no bucket of {tuple(buckets)}")


def host_runs(on_host: Sequence[bool], sizes: Sequence[int]) -> list[tuple[int, int]]:
    """Row ranges [start, stop) of consecutive host-side inputs: each becomes one host-to-device
    copy, so a batch whose inputs all came from the host moves with exactly one."""
    runs: list[tuple[int, int]] = []
    offset = 0
    for host, size in zip(on_host, sizes, strict=True):
        if host and size:
            if runs and runs[-1][1] == offset:
                runs[-1] = (runs[-1][0], offset + size)
            else:
                runs.append((offset, offset + size))
        offset += size
    return runs


class Stager:
    """The batch's input buffer on the model's device, filled from the requests' inputs."""

    def __init__(self, capacity: int, item_shape: Sequence[int], device: torch.device) -> None:
        self.capacity = capacity
        self.item_shape = tuple(item_shape)
        self.on_gpu = device.type == "cuda"
        # pinned: the host-to-device copy is a DMA that does not block the host
        self.host = torch.zeros((capacity, *self.item_shape), dtype=torch.float32, pin_memory=self.on_gpu)
        self.device = torch.zeros_like(self.host, device=device) if self.on_gpu else self.host
        self.copies = {"host": 0, "h2d": 0, "d2d": 0}  # counted for tests and the bench

    def stage(self, inputs: Sequence[torch.Tensor]) -> int:
        """Copy the inputs (each [k, *item_shape], FP32, on the CPU or any GPU) into rows 0..n-1
        of the device buffer; returns n. Asynchronous on the GPU: the current stream orders it."""
        sizes = [int(t.shape[0]) for t in inputs]
        total = sum(sizes)
        if total > self.capacity:
            raise ValueError(f"batch of {total} exceeds the staging capacity {self.capacity}")
        for tensor in inputs:
            if tuple(tensor.shape[1:]) != self.item_shape or tensor.dtype != torch.float32:
                raise ValueError(f"input {tuple(tensor.shape)} {tensor.dtype}: expected [k, {self.item_shape}] float32")
        on_host = [t.device.type == "cpu" for t in inputs]
        offset = 0
        for tensor, size, host in zip(inputs, sizes, on_host, strict=True):
            if host:
                self.host[offset : offset + size].copy_(tensor)
                self.copies["host"] += 1
            else:  # CUDA shared memory: stays on the GPUs (peer copy when it lives on another one)
                self.device[offset : offset + size].copy_(tensor, non_blocking=True)
                self.copies["d2d"] += 1
            offset += size
        if self.on_gpu:
            for start, stop in host_runs(on_host, sizes):
                self.device[start:stop].copy_(self.host[start:stop], non_blocking=True)
                self.copies["h2d"] += 1
        return total


class Runner:
    """model(staged rows) -> FP32 output rows on the device: eager, or a CUDA graph per bucket
    (mode "graph"; "compile" captures torch.compile's code the same way). Graph capture that
    fails falls back to eager, with the reason in ``fallback``."""

    def __init__(
        self,
        model: torch.nn.Module,
        stager: Stager,
        buckets: Sequence[int],
        dtype: torch.dtype,
        mode: str = "graph",
        log: Callable[[str], None] = print,
    ) -> None:
        if mode not in RUNNER_MODES:
            raise ValueError(f"runner must be one of {', '.join(RUNNER_MODES)}, found {mode!r}")
        if buckets[-1] < stager.capacity:
            raise ValueError(f"largest bucket {buckets[-1]} is below the staging capacity {stager.capacity}")
        self.model, self.stager, self.buckets, self.dtype = model, stager, tuple(buckets), dtype
        self.mode = mode if stager.on_gpu else "eager"  # graphs are a GPU feature
        self.log = log
        self.fallback: str | None = None
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self._forward_fn: Callable[[torch.Tensor], torch.Tensor] = model

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        # dtype conversion on the device: the FP32 bytes cross PCIe once, the fp16 cast is a kernel
        return self._forward_fn(rows.to(self.dtype)).float()

    def prepare(self) -> float:
        """Compile and/or capture at start-up; returns the seconds it took."""
        start = time.monotonic()
        if self.mode == "eager":
            with torch.inference_mode():  # first call allocates; keep it out of measurements
                self.forward(self.stager.device[:1])
            return time.monotonic() - start
        try:
            if self.mode == "compile":
                from torch import _dynamo

                # one specialised compile per bucket: more shapes than dynamo's default cache holds
                _dynamo.config.cache_size_limit = max(64, _dynamo.config.cache_size_limit)
                self._forward_fn = torch.compile(self.model, dynamic=False)
            self._capture()
        except Exception as exc:  # noqa: BLE001 - any capture failure: serve eagerly, say why
            self.graphs.clear()
            self._forward_fn = self.model
            self.fallback = f"{type(exc).__name__}: {exc}"
            self.log(f"CUDA graph capture failed, running eagerly: {self.fallback}")
            with torch.inference_mode():
                self.forward(self.stager.device[:1])
        return time.monotonic() - start

    def _capture(self) -> None:
        pool = torch.cuda.graph_pool_handle()  # one pool: only one graph runs at a time
        with torch.inference_mode():
            for size in sorted(self.buckets, reverse=True):  # largest first: the pool fits all
                rows = self.stager.device[:size]
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):  # warm-up off the capture, as CUDA graphs require
                    for _ in range(2):
                        self.forward(rows)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    out = self.forward(rows)
                self.graphs[size] = (graph, out)
        torch.cuda.synchronize()

    def run(self, n: int) -> torch.Tensor:
        """Output rows 0..n-1 for the n staged inputs (rows past n of a bucket are padding)."""
        size = choose_bucket(n, self.buckets)
        if size in self.graphs:
            graph, out = self.graphs[size]
            graph.replay()
            return out[:n]
        with torch.inference_mode():
            return self.forward(self.stager.device[:n])
