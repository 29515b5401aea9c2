"""An independent check on the load engine: the plainest correct client we can write.

aiohttp, N coroutines each posting the same KServe v2 binary request in a loop for a fixed time,
throughput = completed / elapsed. No windows, no workers, nothing shared with engine/load, so
when both agree on a scaling ratio the agreement means something.

    python bench/plain_client.py --url http://127.0.0.1:8000 --model openclip_vit_b32 \
        --concurrency 64 --seconds 15 [--warmup 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import aiohttp
import numpy as np


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--input", default="image")
    p.add_argument("--shape", default="3,224,224")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--warmup", type=float, default=3.0)
    args = p.parse_args()

    shape = [args.batch, *(int(x) for x in args.shape.split(","))]
    data = np.random.default_rng(0).random(shape, dtype=np.float32).tobytes()
    header = json.dumps({"inputs": [{"name": args.input, "shape": shape, "datatype": "FP32",
                                     "parameters": {"binary_data_size": len(data)}}]}).encode()
    body = header + data
    headers = {"Inference-Header-Content-Length": str(len(header)), "Content-Type": "application/octet-stream"}
    url = f"{args.url}/v2/models/{args.model}/infer"
    done = errors = 0
    first_error: list[str] = []
    latencies: list[float] = []
    measuring = False

    async def loop(session: aiohttp.ClientSession, until: float) -> None:
        nonlocal done, errors
        while time.perf_counter() < until:
            start = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                payload = await response.read()
                ok = response.status == 200
                if not ok and not first_error:
                    first_error.append(f"HTTP {response.status}: {payload[:300]!r}")
            if measuring:
                if ok:
                    done += 1
                    latencies.append(time.perf_counter() - start)
                else:
                    errors += 1

    connector = aiohttp.TCPConnector(limit=args.concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(loop(session, time.perf_counter() + args.warmup) for _ in range(args.concurrency)))
        measuring = True
        t0 = time.perf_counter()
        await asyncio.gather(*(loop(session, t0 + args.seconds) for _ in range(args.concurrency)))
        elapsed = time.perf_counter() - t0
    lat = np.array(latencies) * 1e3
    print(json.dumps({
        "model": args.model, "concurrency": args.concurrency, "batch": args.batch, "seconds": round(elapsed, 2),
        "requests": done, "errors": errors, "throughput_ips": round(done * args.batch / elapsed, 1),
        "p50_ms": round(float(np.percentile(lat, 50)), 2) if done else None,
        "p99_ms": round(float(np.percentile(lat, 99)), 2) if done else None,
        "first_error": first_error[0] if first_error else None,
    }))


if __name__ == "__main__":
    asyncio.run(main())
