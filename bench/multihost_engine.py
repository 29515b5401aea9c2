"""The engine for load from several hosts, measured: the group's own store (engine/multihost/store.py)
against torch.distributed's TCPStore (what the probe's torchrun path uses; the group's store until
it had its own) in alternating rounds, and Ray where asked, on this machine's loopback.

For each engine: the time to form a group, what it costs a host to publish one window to the
head (a real window's JSON with its latency histogram, about 13 KB: the sender's call, and the
delivery from send to the head having it, both read on the one clock of this machine), and the
skew of a start barrier (every host ready, the head names an instant, each host sleeps and spins
to it: the spread of the instants they woke at). The Ray half runs under another Python that has
Ray (``--ray-python``): this file needs only the standard library there. Results as JSON in $OUT.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WINDOWS = 200  # windows each host publishes
ROUNDS = 20  # start barriers
LEAD_NS = 200_000_000  # the head names an instant this far ahead


def payload_text() -> str:
    """A window as a host sends it: a real WindowResult's JSON with its histogram (about 2 KB)."""
    import numpy as np

    from engine.analysis.percentiles import latency_stats
    from engine.events import WindowResult

    rng = np.random.default_rng(1)
    samples = rng.lognormal(np.log(3e6), 0.5, 2000).astype(np.int64)
    window = WindowResult(level=256.0, index=3, warmup=False, t_start=1.0, t_end=6.0, requests=samples.size, errors=0,
                          throughput_rps=400.0, throughput_ips=400.0, latency=latency_stats(samples, histogram=True))
    return json.dumps(window.to_dict())


def spin_until(wall_ns: int) -> int:
    """Sleep, then spin, to ``wall_ns``; the instant woken at."""
    while (left := wall_ns - time.time_ns()) > 2_000_000:
        time.sleep((left - 1_000_000) / 1e9)
    while time.time_ns() < wall_ns:
        pass
    return time.time_ns()


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
            "max": ordered[-1], "n": len(ordered)}


def measure_merge(hosts_list: tuple[int, ...] = (2, 8, 32), samples: tuple[int, ...] = (2000, 20000),
                  reps: int = 20) -> list[dict[str, Any]]:
    """The head's cost to merge one window: every host's JSON decoded into a WindowResult, then
    engine/analysis/host_merge.merged_window (histograms summed, percentiles read)."""
    import numpy as np

    from engine.analysis.host_merge import merged_window
    from engine.analysis.percentiles import latency_stats
    from engine.events import WindowResult, event_from_dict

    rng = np.random.default_rng(2)
    rows = []
    for n in samples:
        for hosts in hosts_list:
            texts = []
            for _ in range(hosts):
                s = rng.lognormal(np.log(3e6), 0.5, n).astype(np.int64)
                texts.append(json.dumps(WindowResult(
                    level=256.0, index=3, warmup=False, t_start=1.0, t_end=6.0, requests=n, errors=0,
                    throughput_rps=n / 5, throughput_ips=n / 5, latency=latency_stats(s, histogram=True)).to_dict()))
            t = time.perf_counter()
            for _ in range(reps):
                merged_window(256.0, [(str(i), event_from_dict(json.loads(x))) for i, x in enumerate(texts)], None)
            per = (time.perf_counter() - t) / reps
            rows.append({"samples_per_window": n, "hosts": hosts, "merge_ms": per * 1e3,
                         "per_host_window_ms": per / hosts * 1e3, "json_bytes": len(texts[0])})
    return rows


# --------------------------------------------------------------------------- the stores

STORES = {"ours": "the group's store", "tcpstore": "torch TCPStore"}


def _tcpstore(port: int, hosts: int, master: bool) -> Any:
    import datetime

    import torch.distributed as dist

    return dist.TCPStore("127.0.0.1", port, hosts + 1, is_master=master, wait_for_workers=False,
                         timeout=datetime.timedelta(seconds=60))


def _client(kind: str, port: int, hosts: int) -> Any:
    if kind == "ours":
        from engine.multihost.store import StoreClient

        return StoreClient("127.0.0.1", port, 60.0)
    return _tcpstore(port, hosts, master=False)


def _store_host(kind: str, rank: int, port: int, hosts: int, payload: str) -> None:
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
    t = time.perf_counter()
    if kind == "ours":
        import engine.multihost.store  # noqa: F401 - the import is what is timed
    else:
        import torch.distributed  # noqa: F401

    imported = time.perf_counter() - t
    t = time.perf_counter()
    store = _client(kind, port, hosts)
    store.set(f"joined/{rank}", json.dumps([imported, time.perf_counter() - t]))
    store.wait(["go"])  # every host joined: publishing starts together
    costs = []
    for i in range(WINDOWS):
        sent = time.time_ns()
        t = time.perf_counter_ns()
        store.set(f"win/{rank}/{i}", json.dumps([sent, payload]))
        costs.append(time.perf_counter_ns() - t)
        time.sleep(0.002)
    store.set(f"cost/{rank}", json.dumps(costs))
    for r in range(ROUNDS):
        store.set(f"ready/{r}/{rank}", "1")
        store.wait([f"start/{r}"])
        woke = spin_until(int(store.get(f"start/{r}")))
        store.set(f"woke/{r}/{rank}", str(woke))


def measure_store(kind: str, hosts: int, payload: str) -> dict[str, Any]:
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
    if kind == "ours":
        from engine.multihost.store import serve

        store: Any = serve("127.0.0.1", 0, 60.0)
        port = store.address[1]
    else:
        store = _tcpstore(0, hosts, master=True)
        port = store.port
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_store_host, args=(kind, r, port, hosts, payload)) for r in range(1, hosts + 1)]
    for p in procs:
        p.start()
    store.wait([f"joined/{r}" for r in range(1, hosts + 1)])
    joins = [json.loads(store.get(f"joined/{r}")) for r in range(1, hosts + 1)]
    store.set("go", "1")
    delivery, decode = [], []
    for i in range(WINDOWS):
        for r in range(1, hosts + 1):
            store.wait([f"win/{r}/{i}"])
            got = time.time_ns()
            t = time.perf_counter_ns()
            sent, _ = json.loads(store.get(f"win/{r}/{i}"))
            decode.append(time.perf_counter_ns() - t)
            delivery.append(got - sent)
    costs = [c for r in range(1, hosts + 1) for c in json.loads(store.get(f"cost/{r}"))]
    skews, lates = [], []
    for rnd in range(ROUNDS):
        store.wait([f"ready/{rnd}/{r}" for r in range(1, hosts + 1)])
        start = time.time_ns() + LEAD_NS
        store.set(f"start/{rnd}", str(start))
        woke = [spin_until(start)]
        store.wait([f"woke/{rnd}/{r}" for r in range(1, hosts + 1)])
        woke += [int(store.get(f"woke/{rnd}/{r}")) for r in range(1, hosts + 1)]
        skews.append(max(woke) - min(woke))
        lates.append(max(woke) - start)
    for p in procs:
        p.join(30)
    if kind == "ours":
        store.close()
    return {"engine": STORES[kind], "hosts": hosts, "import_s": max(j[0] for j in joins),
            "form_group_s": max(j[1] for j in joins),
            "publish_call_us": summary([c / 1e3 for c in costs]), "delivery_us": summary([d / 1e3 for d in delivery]),
            "head_get_decode_us": summary([d / 1e3 for d in decode]),
            "barrier_skew_us": summary([s / 1e3 for s in skews]), "barrier_late_us": summary([s / 1e3 for s in lates])}


# --------------------------------------------------------------------------- Ray (standard library + ray only)

def measure_ray(hosts: int, payload: str) -> dict[str, Any]:
    import asyncio

    t = time.perf_counter()
    import ray

    imported = time.perf_counter() - t
    t = time.perf_counter()
    ray.init(num_cpus=hosts + 1, include_dashboard=False, log_to_driver=False)

    @ray.remote
    class Head:
        def __init__(self) -> None:
            self.delivery: list[int] = []
            self.ready: dict[int, set[int]] = {}
            self.starts: dict[int, asyncio.Event] = {}
            self.start_at: dict[int, int] = {}
            self.woke: dict[int, list[int]] = {}

        async def window(self, sent: int, text: str) -> None:
            got = time.time_ns()
            json.loads(text)
            self.delivery.append(got - sent)

        async def ready_for(self, rnd: int, rank: int) -> int:
            self.ready.setdefault(rnd, set()).add(rank)
            event = self.starts.setdefault(rnd, asyncio.Event())
            if len(self.ready[rnd]) == hosts:
                self.start_at[rnd] = time.time_ns() + LEAD_NS
                event.set()
            await event.wait()
            return self.start_at[rnd]

        async def woke_at(self, rnd: int, woke: int) -> None:
            self.woke.setdefault(rnd, []).append(woke)

        async def results(self) -> tuple[list[int], dict[int, int], dict[int, list[int]]]:
            return self.delivery, self.start_at, self.woke

    @ray.remote
    def host(head: Any, rank: int) -> list[int]:
        costs = []
        for _ in range(WINDOWS):
            sent = time.time_ns()
            t = time.perf_counter_ns()
            head.window.remote(sent, payload)  # fire and forget, as a host publishing would
            costs.append(time.perf_counter_ns() - t)
            time.sleep(0.002)
        for rnd in range(ROUNDS):
            start = ray.get(head.ready_for.remote(rnd, rank))
            head.woke_at.remote(rnd, spin_until(start))
        return costs

    head = Head.remote()
    ray.get(head.results.remote())
    formed_s = time.perf_counter() - t
    costs = [c for cs in ray.get([host.remote(head, r) for r in range(hosts)]) for c in cs]
    time.sleep(1.0)  # the last woke_at calls land
    delivery, start_at, woke = ray.get(head.results.remote())
    skews = [max(w) - min(w) for w in woke.values() if len(w) == hosts]
    lates = [max(woke[r]) - start_at[r] for r in woke if len(woke[r]) == hosts]
    ray.shutdown()
    return {"engine": f"Ray {ray.__version__}", "hosts": hosts, "import_s": imported, "form_group_s": formed_s,
            "publish_call_us": summary([c / 1e3 for c in costs]), "delivery_us": summary([d / 1e3 for d in delivery]),
            "barrier_skew_us": summary([s / 1e3 for s in skews]), "barrier_late_us": summary([s / 1e3 for s in lates])}


# --------------------------------------------------------------------------- stage

def build_parser(prog: str, _stage: str = "") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Fits: any box (processes on loopback, no server or GPU); a minute or two, more with Ray.")
    p.add_argument("--hosts", type=int, default=3, help="hosts besides the head (processes on loopback)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of the two stores")
    p.add_argument("--ray-python", default=None, metavar="PATH", help="a Python with Ray installed: measure Ray too")
    return p


def run(args: argparse.Namespace) -> int:
    from bench.common import out_dir

    payload = payload_text()
    rows = [measure_store(kind, args.hosts, payload) for _ in range(args.rounds) for kind in STORES]
    if args.ray_python:
        proc = subprocess.run([args.ray_python, __file__, "--ray", str(args.hosts)], input=payload, text=True,
                              capture_output=True, timeout=600)
        if proc.returncode != 0:
            print(f"ray: failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        else:
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    merge = measure_merge()
    out = Path(out_dir()) / "multihost_engine.json"
    out.write_text(json.dumps({"payload_bytes": len(payload), "windows": WINDOWS, "rounds": ROUNDS, "rows": rows,
                               "merge": merge}, indent=2), encoding="utf-8")
    for m in merge:
        print(f"merge: {m['hosts']} hosts x {m['samples_per_window']} samples: {m['merge_ms']:.1f} ms a window, "
              f"{m['per_host_window_ms']:.2f} ms a host-window")
    for row in rows:
        print(f"{row['engine']:<16} import {row['import_s']:.2f} s  form {row['form_group_s']:.2f} s  publish call p50 "
              f"{row['publish_call_us']['median']:.0f} us  delivery p50 {row['delivery_us']['median']:.0f} us "
              f"p99 {row['delivery_us']['p99']:.0f} us  barrier skew p50 {row['barrier_skew_us']['median']:.0f} us "
              f"max {row['barrier_skew_us']['max']:.0f} us")
    for figure, key in (("publish call p50", "publish_call_us"), ("delivery p50", "delivery_us")):
        ratios = [ours[key]["median"] / torch[key]["median"] for ours, torch in zip(rows[0::2], rows[1::2], strict=False)
                  if ours["engine"] == STORES["ours"] and torch["engine"] == STORES["tcpstore"]]
        print(f"ours / TCPStore, {figure}, by round: {' '.join(f'{r:.2f}' for r in ratios)}")
    print(f"-> {out}")
    return 0


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--ray":
    print(json.dumps(measure_ray(int(sys.argv[2]), sys.stdin.read())))
