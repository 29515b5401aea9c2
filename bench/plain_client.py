"""An independent check on the load engine: the plainest correct client we can write.

Standard library only: P processes x T threads, each thread with one keep-alive
http.client connection posting the same KServe v2 binary request in a loop for a fixed time;
throughput = responses completed inside the measured interval / its length. No windows, no
stability rule, nothing shared with engine/load, so when both agree on a scaling ratio the
agreement means something.

    python bench/plain_client.py --url http://127.0.0.1:8000 --model openclip_vit_b32 \
        --concurrency 64 --seconds 15 [--warmup 3] [--processes 8]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import threading
import time
from urllib.parse import urlsplit

import numpy as np


def _thread(host: str, port: int, path: str, body: bytes, headers: dict[str, str], t_measure: float,
            t_end: float, out: list, errors: list) -> None:
    conn = http.client.HTTPConnection(host, port, timeout=30)
    while True:
        start = time.monotonic()
        if start >= t_end:
            break
        try:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            ok = response.status == 200
        except (OSError, http.client.HTTPException) as exc:
            ok, payload = False, repr(exc).encode()
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=30)
        end = time.monotonic()
        if t_measure <= end <= t_end:  # a response belongs to the interval it ends in
            if ok:
                out.append(end - start)
            else:
                errors.append(payload[:200])
    conn.close()


def _process(args: dict, threads: int, t_measure: float, t_end: float, queue: mp.Queue) -> None:
    parts = urlsplit(args["url"])
    latencies: list[float] = []
    errors: list[bytes] = []
    workers = [threading.Thread(target=_thread, args=(parts.hostname, parts.port, args["path"], args["body"],
                                                      args["headers"], t_measure, t_end, latencies, errors))
               for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    queue.put((latencies, errors[:3], len(errors)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--input", default="image")
    p.add_argument("--output", default="embedding")
    p.add_argument("--shape", default="3,224,224")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--processes", type=int, default=8)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--warmup", type=float, default=3.0)
    args = p.parse_args()

    shape = [args.batch, *(int(x) for x in args.shape.split(","))]
    data = np.random.default_rng(0).random(shape, dtype=np.float32).tobytes()
    # binary output as perf_analyzer asks for it (seen on a KIND_GPU Python-backend model: a JSON
    # output request failed with "output tensor shape does not match size of output")
    header = json.dumps({"inputs": [{"name": args.input, "shape": shape, "datatype": "FP32",
                                     "parameters": {"binary_data_size": len(data)}}],
                         "outputs": [{"name": args.output, "parameters": {"binary_data": True}}]}).encode()
    shared = {
        "url": args.url, "path": f"/v2/models/{args.model}/infer", "body": header + data,
        "headers": {"Inference-Header-Content-Length": str(len(header)), "Content-Type": "application/octet-stream"},
    }
    processes = max(1, min(args.processes, args.concurrency))
    per = [args.concurrency // processes + (1 if i < args.concurrency % processes else 0) for i in range(processes)]
    t_measure = time.monotonic() + 1.0 + args.warmup  # 1 s for the processes to start
    t_end = t_measure + args.seconds
    queue: mp.Queue = mp.get_context("fork").Queue()
    procs = [mp.get_context("fork").Process(target=_process, args=(shared, n, t_measure, t_end, queue)) for n in per]
    for proc in procs:
        proc.start()
    results = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()
    latencies = np.array([x for r in results for x in r[0]]) * 1e3
    n_errors = sum(r[2] for r in results)
    first_error = next((r[1][0] for r in results if r[1]), None)
    print(json.dumps({
        "model": args.model, "concurrency": args.concurrency, "batch": args.batch, "seconds": args.seconds,
        "requests": int(latencies.size), "errors": n_errors,
        "throughput_ips": round(latencies.size * args.batch / args.seconds, 1),
        "p50_ms": round(float(np.percentile(latencies, 50)), 2) if latencies.size else None,
        "p99_ms": round(float(np.percentile(latencies, 99)), 2) if latencies.size else None,
        "first_error": first_error.decode(errors="replace") if first_error else None,
    }))


if __name__ == "__main__":
    main()
