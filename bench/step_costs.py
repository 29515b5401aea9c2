"""What a sequence step costs by how the client sends it: a minimal blocking HTTP client against
the embedded `accumulator`, one step in flight, in alternating rounds of arms that each change
one thing perf_analyzer does differently from our engine (read off its wire and `strace -f`):

- ``ours``: our request form (no ``id``), input 8, sequence ids 1-4 reused, one write per request;
- ``two_writes``: the head and the body in two writes, as perf_analyzer's libcurl sends them;
- ``hand_off``: each answer handed to a second thread and back before the next step, as
  perf_analyzer's curl thread wakes its load thread;
- ``id``: perf_analyzer's ``"id"`` field in the request;
- ``fresh_ids``: a new sequence id per sequence, from 1,000,000,000 as perf_analyzer's range;
- ``pa_value``: perf_analyzer's random INT32 input (its running sum overflows INT32 in the model).

Per arm and round: steps/s, the client's p50, and Triton's own request and compute_infer time per
step (its statistics). The anchor is the ``ours`` arm in the same rounds; the ratios say what each
difference costs. --server-core / --client-core keep the two apart (``-1``: not pinned).

    python -m bench step_costs --rounds 3 --sequences 60
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import model_stats, out_dir

ARMS = ("ours", "two_writes", "hand_off", "id", "fresh_ids", "pa_value")
PA_VALUE = 1_936_311_911  # the value perf_analyzer's random data sent in the capture (bench/http_capture.py)
STEPS = 20


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                epilog="Fits: any box, CPU; about 2 minutes at the defaults (6 arms x 3 rounds x 1,200 steps).")
    p.add_argument("--arms", default=",".join(ARMS), help=f"of {', '.join(ARMS)}")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sequences", type=int, default=60, help=f"sequences of {STEPS} steps per arm and round")
    p.add_argument("--server-core", type=int, default=1, help="the server's core (-1: not pinned)")
    p.add_argument("--client-core", type=int, default=0, help="this client's core (-1: not pinned)")
    return p


def _request(seq: int, start: bool, end: bool, value: int, rid: int | None) -> tuple[bytes, bytes]:
    top: dict[str, Any] = {"id": str(rid)} if rid is not None else {}
    top.update({"parameters": {"sequence_id": seq, "sequence_start": start, "sequence_end": end},
                "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "parameters": {"binary_data_size": 4}}],
                "outputs": [{"name": "OUTPUT", "parameters": {"binary_data": True}}]})
    header = json.dumps(top).encode()
    body = header + struct.pack("<i", value)
    head = (f"POST /v2/models/accumulator/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: {len(header)}\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    return head, body


def _answer(sock: socket.socket, buf: bytes) -> tuple[int, bytes]:
    """The status of one HTTP answer and the bytes after it."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    length = next(int(x.split(b":")[1]) for x in lines if x.lower().startswith(b"content-length"))
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(lines[0].split()[1]), rest[length:]


class HandOff:
    """A second thread each answer goes to, and back from, before the next step."""

    def __init__(self) -> None:
        self.q: queue.Queue[tuple[threading.Event, threading.Event]] = queue.Queue()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            done, back = self.q.get()
            done.wait()
            back.set()

    def round_trip(self) -> None:
        done, back = threading.Event(), threading.Event()
        self.q.put((done, back))
        done.set()
        back.wait()


def one_arm(arm: str, sock: socket.socket, url: str, sequences: int, ids: dict[str, int], hand_off: HandOff) -> dict[str, float]:
    before = model_stats(url, "accumulator")
    lat: list[float] = []
    buf, t0 = b"", time.perf_counter()
    for k in range(sequences):
        if arm == "fresh_ids":
            ids["fresh"] += 1
        seq = ids["fresh"] if arm == "fresh_ids" else 1 + k % 4
        for step in range(STEPS):
            ids["rid"] += 1
            head, body = _request(seq, step == 0, step == STEPS - 1, PA_VALUE if arm == "pa_value" else 8,
                                  ids["rid"] if arm == "id" else None)
            sent = time.perf_counter()
            if arm == "two_writes":
                sock.sendall(head)
                sock.sendall(body)
            else:
                sock.sendall(head + body)
            status, buf = _answer(sock, buf)
            if status != 200:
                raise RuntimeError(f"{arm}: HTTP {status} at sequence {seq} step {step}")
            if arm == "hand_off":
                hand_off.round_trip()
            lat.append(time.perf_counter() - sent)
    wall = time.perf_counter() - t0
    after = model_stats(url, "accumulator")
    n = len(lat)
    return {"steps_s": n / wall, "p50_us": statistics.median(lat) * 1e6,
            "server_us": (after.get("request_ns", 0) - before.get("request_ns", 0)) / n / 1e3,
            "infer_us": (after.get("compute_infer_ns", 0) - before.get("compute_infer_ns", 0)) / n / 1e3}


def summary(rows: list[dict[str, Any]], arms: list[str]) -> list[str]:
    lines = ["| arm | steps/s per round | / ours, mean [min-max] | p50 µs | Triton request µs/step | compute_infer µs/step |",
             "|---|---|---|---|---|---|"]
    for arm in arms:
        mine = [r for r in rows if r["arm"] == arm]
        ratios = [r["steps_s"] / o["steps_s"] for r in mine for o in rows if o["arm"] == "ours" and o["round"] == r["round"]]
        band = (f"{statistics.fmean(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]" if ratios and arm != "ours"
                else "1 (the anchor)" if arm == "ours" else "n/a")

        def span(key: str, mine: list[dict[str, Any]] = mine) -> str:
            xs = [r[key] for r in mine]
            return f"{min(xs):,.0f}-{max(xs):,.0f}" if xs else "n/a"

        per_round = ", ".join(f"{r['steps_s']:,.0f}" for r in mine)
        lines.append(f"| {arm} | {per_round} | {band} | {span('p50_us')} | "
                     f"{span('server_us')} | {span('infer_us')} |")
    return lines


def run(args: argparse.Namespace) -> int:
    from engine.server.embedded import EmbeddedServer

    arms = [a for a in args.arms.split(",") if a]
    if not arms or any(a not in ARMS for a in arms) or args.rounds < 1 or args.sequences < 1:
        print(f"step_costs: --arms each of {', '.join(ARMS)}; --rounds and --sequences > 0", file=sys.stderr)
        return 2
    if "ours" not in arms:
        arms.insert(0, "ours")  # the anchor
    server_cpus = (args.server_core,) if args.server_core >= 0 else ()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as logs, EmbeddedServer(model="accumulator", variant="cpu", log_dir=Path(logs),
                                                               cpus=server_cpus) as srv:
        if args.client_core >= 0:
            os.sched_setaffinity(0, {args.client_core})
        host, port = srv.http_url.removeprefix("http://").rsplit(":", 1)
        sock = socket.create_connection((host, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as libcurl and our engine set it
        ids, hand_off = {"fresh": 1_000_000_000, "rid": 0}, HandOff()
        print(f"== accumulator at {srv.http_url}; server core {args.server_core}, client core {args.client_core}; "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
        one_arm("ours", sock, srv.http_url, max(10, args.sequences // 3), ids, hand_off)  # warm-up, not kept
        for rnd in range(args.rounds):
            for arm in arms if rnd % 2 == 0 else list(reversed(arms)):
                row = {"arm": arm, "round": rnd, **one_arm(arm, sock, srv.http_url, args.sequences, ids, hand_off)}
                rows.append(row)
                print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
        sock.close()
    (out_dir() / "step_costs.json").write_text(json.dumps(rows, indent=1))
    print("\n".join(["", *summary(rows, arms), "", f"load average after {os.getloadavg()[0]:.2f}"]))
    return 0
