"""Does EmbeddedServer.stop() return only when the server and its Python-backend stubs are gone?

On the 4x H200 study (issue 15) the box check of the 4x config, run right after the 2x config's
server stopped, found that server's stub still on GPU 1 (1.7 GiB). Here, per variant: start the
embedded openclip_vit_b32 server, send a few requests (the stubs hold their CUDA contexts), stop
it, and at once ask NVML which processes hold each GPU and /proc which processes of the server's
process group are left. One JSON line per round; exit 1 when anything was left.

    python bench/gpu_server_stop.py [--variants 1x,2x,4x] [--rounds 2] [--requests 20]

Under $OUT (default /tmp/out): the server logs. About 25 s per round (start, requests, stop).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.server.embedded import EmbeddedServer  # noqa: E402 - after the path above

MODEL = "openclip_vit_b32"


def infer(url: str, batch: int = 1) -> None:  # batch 1, as the study sends
    data = np.random.default_rng(0).random((batch, 3, 224, 224), dtype=np.float32)
    header = json.dumps({
        "inputs": [{"name": "image", "shape": list(data.shape), "datatype": "FP32",
                    "parameters": {"binary_data_size": data.nbytes}}],
        "outputs": [{"name": "embedding", "parameters": {"binary_data": True}}],
    }).encode()
    request = urllib.request.Request(f"{url}/v2/models/{MODEL}/infer", data=header + data.tobytes(),
                                     headers={"Inference-Header-Content-Length": str(len(header))})
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - our loopback server
        response.read()


def gpu_processes() -> list[dict]:
    import pynvml

    pynvml.nvmlInit()
    try:
        found = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                try:
                    name = Path(f"/proc/{p.pid}/comm").read_text().strip()
                except OSError:
                    name = "?"
                found.append({"gpu": i, "pid": p.pid, "name": name,
                              "mib": round((p.usedGpuMemory or 0) / 2**20)})
        return found
    finally:
        pynvml.nvmlShutdown()


def group(pgid: int) -> list[str]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2:].split()
            if int(fields[2]) == pgid:
                out.append(f"{entry.name} {fields[0].decode()}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="1x,2x,4x")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--requests", type=int, default=20)
    args = ap.parse_args()
    out = Path(os.environ.get("OUT", "/tmp/out"))
    before = gpu_processes()
    print(json.dumps({"gpu_processes_before": before}), flush=True)
    bad = 0
    for variant in args.variants.split(","):
        for n in range(args.rounds):
            server = EmbeddedServer(model=MODEL, variant=variant, log_dir=out / f"stop_{variant}_{n}").start()
            pgid = server.pid
            assert pgid is not None
            try:
                for _ in range(args.requests):
                    infer(server.http_url)
                during = gpu_processes()
            finally:
                t0 = time.monotonic()
                server.stop()
                stop_s = time.monotonic() - t0
            after, left = gpu_processes(), group(pgid)
            ours = [p for p in after if p["pid"] not in {q["pid"] for q in before}]
            bad += bool(ours or left or server.left_behind)
            print(json.dumps({"variant": variant, "round": n, "stop_s": round(stop_s, 2),
                              "stubs_on_gpus_while_up": len([p for p in during if "python" in p["name"]]),
                              "gpu_processes_after_stop": ours, "group_left": left,
                              "left_behind": server.left_behind}), flush=True)
    print("nothing left after any stop" if not bad else f"{bad} stops left something behind", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
