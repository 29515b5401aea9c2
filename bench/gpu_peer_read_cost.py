"""Does another process reading a GPU's memory slow that GPU's own kernels? (issue 14)

Over CUDA shared memory the load engine keeps every input on the first GPU; the other GPUs'
model instances read it from there. In session 7 the GPU that held the inputs took 11.8-13.7 ms
per batch of 128 against 9.4-10.0 ms on the other (docs/results/
staggered_fidelity_and_cuda_shm_instances_h200.md). This bench isolates the ways a reader in
another process can touch that GPU, as the Python backend's stub does for each request
(python_backend pb_memory.cc / pb_utils.cc: cudaIpcOpenMemHandle in the source GPU's context,
a copy, cudaIpcCloseMemHandle when the tensor is released).

One process (the "victim") owns a buffer on GPU 0 and times a fixed run of fp16 matmuls on GPU 0
with CUDA events. One or more processes on GPU 1 (--readers, as a GPU's model instances) read that buffer, phase
by phase, the rate shared among them:
- idle:        nothing;
- held:        the IPC handle opened once, then cuMemcpyAsync on GPU 1's stream (peer read);
- open_close:  open, copy, close for every read, as the stub does;
- torch:       held, but the copy is torch's cross-device copy_, which runs on the source GPU's
               stream (work of the reader's GPU-0 context on GPU 0).
Reads are paced at --rate per second (19.3 MB each = 32 images of 602 KB). The victim's time
per run is printed per phase with its median and p90, against the idle phases before and after.

Usage (device, 2+ GPUs; bench/gpu_env.sh): python3 bench/gpu_peer_read_cost.py --rates 300,1000
Writes $OUT/peer_read_cost_<readers>.json. About 40 s.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing as mp
import os
import statistics
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

LAZY_PEER_ACCESS = 1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def _driver() -> dict[str, Any]:
    cu = ctypes.CDLL("libcuda.so.1")

    def fn(name: str, *argtypes: Any) -> Any:
        f = getattr(cu, name)
        f.argtypes = list(argtypes)
        f.restype = ctypes.c_int
        return f

    u64 = ctypes.c_uint64
    return {
        "alloc": fn("cuMemAlloc_v2", ctypes.POINTER(u64), ctypes.c_size_t),
        "get": fn("cuIpcGetMemHandle", ctypes.POINTER(IpcHandle), u64),
        "open": fn("cuIpcOpenMemHandle_v2" if hasattr(cu, "cuIpcOpenMemHandle_v2") else "cuIpcOpenMemHandle",
                   ctypes.POINTER(u64), IpcHandle, ctypes.c_uint),
        "close": fn("cuIpcCloseMemHandle", u64),
        "copy": fn("cuMemcpyAsync", u64, u64, ctypes.c_size_t, ctypes.c_void_p),
    }


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed with CUresult {status}")


class _Pointer:
    """A raw device pointer as a uint8 tensor (torch reads __cuda_array_interface__)."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3}


def reader(conn: Connection, handle: bytes, nbytes: int) -> None:
    try:
        _read(conn, handle, nbytes)
    except Exception as exc:  # noqa: BLE001 - the parent prints it and stops
        conn.send(("error", f"{type(exc).__name__}: {exc}", 0.0))


def _read(conn: Connection, handle: bytes, nbytes: int) -> None:
    d = _driver()
    h = IpcHandle.from_buffer_copy(handle)
    torch.zeros(1, device="cuda:0")  # the stub holds a context on the inputs' GPU (it opens there)
    torch.cuda.set_device(1)
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda:1")
    torch.empty(1, device="cuda:0").to("cuda:1")  # torch enables peer access between the two
    stream = torch.cuda.current_stream(1)

    def open_() -> int:
        ptr = ctypes.c_uint64()
        with torch.cuda.device(0):  # as the Python backend: ScopedSetDevice(the source GPU)
            _check(d["open"](ctypes.byref(ptr), h, LAZY_PEER_ACCESS), "cuIpcOpenMemHandle")
        return ptr.value

    def close(ptr: int) -> None:
        with torch.cuda.device(0):
            _check(d["close"](ptr), "cuIpcCloseMemHandle")

    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg == "exit":
            return
        mode, rate, seconds = msg
        held = open_() if mode in ("held", "torch") else 0
        src = torch.as_tensor(_Pointer(held, nbytes), device="cuda:0") if mode == "torch" else None
        reads, gap = 0, 1.0 / rate
        next_t = start = time.monotonic()
        while time.monotonic() - start < seconds:
            if mode == "idle":
                time.sleep(0.01)
                continue
            wait = next_t - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            next_t += gap
            if mode == "torch":
                dst.copy_(src)
                torch.cuda.synchronize(1)
            else:
                ptr = held or open_()
                _check(d["copy"](dst.data_ptr(), ptr, nbytes, stream.cuda_stream), "cuMemcpyAsync")
                stream.synchronize()
                if not held:
                    close(ptr)
            reads += 1
        del src
        if held:
            torch.cuda.synchronize(0)
            close(held)
        conn.send((mode, reads, time.monotonic() - start))


def victim_runs(seconds: float, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> list[float]:
    """ms per run of 8 matmuls on GPU 0, back to back for ``seconds``."""
    times: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(8):
            torch.mm(a, b, out=c)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rates", default="300,1000", help="reads per second, one series of phases each")
    p.add_argument("--mb", type=float, default=19.27, help="MB per read (32 images of 602 KB)")
    p.add_argument("--seconds", type=float, default=1.5, help="per phase")
    p.add_argument("--readers", type=int, default=1, help="reader processes on GPU 1, the rate shared among them")
    args = p.parse_args()
    if torch.cuda.device_count() < 2:
        print("error: needs 2 GPUs")
        return 2
    nbytes = int(args.mb * 1e6)
    torch.cuda.set_device(0)
    d = _driver()
    torch.zeros(1, device="cuda:0")
    ptr = ctypes.c_uint64()
    _check(d["alloc"](ctypes.byref(ptr), nbytes), "cuMemAlloc")
    handle = IpcHandle()
    _check(d["get"](ctypes.byref(handle), ptr.value), "cuIpcGetMemHandle")
    a = torch.randn(4096, 4096, device="cuda:0", dtype=torch.float16)
    b, c = torch.randn_like(a), torch.empty_like(a)
    victim_runs(0.5, a, b, c)  # warm
    ctx = mp.get_context("spawn")
    conns, procs = [], []
    for _ in range(args.readers):
        ours, theirs = ctx.Pipe()
        proc = ctx.Process(target=reader, args=(theirs, bytes(handle), nbytes))
        proc.start()
        conns.append(ours)
        procs.append(proc)
        first = ours.recv() if ours.poll(60) else ("error", "no answer in 60 s", 0.0)
        if first != "ready":
            print(f"error: a reader did not start: {first[1]}")
            return 1
    results = []
    for rate in (float(r) for r in args.rates.split(",")):
        for mode in ("idle", "held", "open_close", "torch", "idle"):
            for ours in conns:
                ours.send((mode, rate / args.readers, args.seconds))
            times = victim_runs(args.seconds, a, b, c)
            reads, elapsed = 0, 0.0
            for ours in conns:
                if not ours.poll(args.seconds + 30):
                    print("error: a reader did not answer")
                    return 1
                got, n, took = ours.recv()
                if got == "error":
                    print(f"error: a reader failed: {n}")
                    return 1
                reads, elapsed = reads + n, max(elapsed, took)
            times.sort()
            row = {"rate": rate, "readers": args.readers, "mode": mode, "runs": len(times), "median_ms": statistics.median(times),
                   "p90_ms": times[int(0.9 * (len(times) - 1))], "reads_per_s": reads / elapsed,
                   "read_gb_per_s": reads * nbytes / elapsed / 1e9}
            results.append(row)
            print(f"rate {rate:6.0f}/s, {args.readers} reader(s)  {mode:<10}  victim {row['median_ms']:.3f} ms median, {row['p90_ms']:.3f} p90"
                  f" ({row['runs']} runs)   reader {row['reads_per_s']:7.1f} reads/s, {row['read_gb_per_s']:.1f} GB/s", flush=True)
    for ours, proc in zip(conns, procs, strict=True):
        ours.send("exit")
        proc.join(30)
    out = Path(os.environ.get("OUT", "."))
    (out / f"peer_read_cost_{args.readers}.json").write_text(json.dumps({"args": vars(args), "gpu": torch.cuda.get_device_name(0), "rows": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
