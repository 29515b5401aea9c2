"""Our unary gRPC client's CPU per call, in parts, against an embedded Triton: no tool beside it.

Three arms, each a fresh process on the clients' core, in alternating rounds:

- ``real``: the load worker's own loop (PreciseEpollSelector), a Worker and the grpc transport's
  calls (engine/triton/transports/grpc.py) at concurrency --levels, over real sockets: user and
  system CPU per answered call, after a tenth of the calls as warm-up. Start-up (imports, the
  Huffman table, connecting) is not in it, as it is in grpc_h2's figure.
- ``replay``: the same Worker and link with no socket: Triton's answer bytes, captured once, fed to
  the link, each answer sending the next request into a transport that only counts writes. What
  our Python costs per call with the caches warm (µs of CPU per call, c=1).
- ``floor``: the least an asyncio client of ours does per call: the same loop and stamped socket,
  a protocol that writes the next request's prepared bytes on each read holding trailers, no
  parsing, no check, no bookkeeping.

With --base-root DIR (a folder holding engine/, e.g. `git archive <commit> engine | tar -x -C DIR`)
``real`` and ``replay`` also run that checkout's engine: a before/after in one run.

    python -m bench grpc_call_cpu --client-cores 1 --base-root /tmp/base

Writes grpc_call_cpu.json to $OUT or .bench-out/.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                epilog="Fits: any box, CPU variant; about a minute at the defaults.")
    p.add_argument("--model", default="identity")
    p.add_argument("--variant", default="cpu")
    p.add_argument("--levels", default="1,4", help="concurrency levels of the real arm")
    p.add_argument("--calls", type=int, default=10000, help="measured calls per real run")
    p.add_argument("--replay-calls", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--client-cores", type=int, default=1)
    p.add_argument("--base-root", default="", help="another checkout's folder holding engine/")
    return p


# -- the session side


def _capture(grpc_address: str, payload: Any) -> dict[str, Any]:
    """Triton's bytes for our handshake and for 4 calls in a row, over one raw socket."""
    import socket

    from engine.net import http2
    from engine.triton.transports.grpc import request_headers

    host, port = grpc_address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(http2.PREFACE + http2.settings_frame({http2.ENABLE_PUSH: 0, http2.INITIAL_WINDOW_SIZE: 1 << 30})
                  + http2.window_update(0, (1 << 30) - http2.DEFAULT_WINDOW))
        time.sleep(0.3)
        hello = s.recv(65536)
        s.sendall(http2.frame(http2.SETTINGS, http2.ACK, 0))
        head = http2.encode_headers(request_headers(grpc_address, False, payload.metadata))
        message = b"\x00" + len(payload.requests[0]).to_bytes(4, "big") + payload.requests[0]
        answers = []
        for k in range(4):
            sid = 1 + 2 * k
            s.sendall(http2.frame(http2.HEADERS, http2.END_HEADERS, sid, head)
                      + http2.frame(http2.DATA, http2.END_STREAM, sid, message))
            reader, got = http2.FrameReader(), b""
            frames: list[tuple[int, int, int, bytes]] = []
            while not any(f[0] == http2.HEADERS and f[1] & http2.END_STREAM for f in frames):
                data = s.recv(65536)
                if not data:
                    raise ConnectionError("the server closed the capture's connection")
                got += data
                frames += reader.feed(data)
            answers.append(got)
    return {"payload": payload, "hello": hello, "answers": answers}


def _payload(url: str, model: str) -> Any:
    import asyncio

    from engine.triton.request_set import random_requests
    from engine.triton.target import Target, describe_target
    from engine.triton.transports import SweepInputs
    from engine.triton.transports.grpc import GrpcTransport

    target = Target(url, model)
    info = asyncio.run(describe_target(target))
    requests = random_requests(target, info, 1, "random")[0]
    return asyncio.run(GrpcTransport().prepare(SweepInputs(target, info, 1, "random", ({}, [], []),
                                                            requests=requests))).payload


def _child(arm: str, root: str, capture: str, calls: int, level: int) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = root
    cmd = [sys.executable, str(HERE), "--child", arm, root, capture, str(calls), str(level)]
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return {"ok": False, "status": (done.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return {"ok": True, **json.loads(done.stdout.strip().splitlines()[-1])}


def _label(name: str, arm: str) -> str:
    return arm if name == arm else f"{name} {arm}"


def run(args: argparse.Namespace) -> int:
    from bench.common import core_split, out_dir, pin_clients
    from engine.server.embedded import EmbeddedServer

    roots = [("ours", str(ROOT))]
    if args.base_root:
        if not os.path.isdir(os.path.join(args.base_root, "engine")):
            print("grpc_call_cpu: --base-root must hold engine/")
            return 2
        roots.append(("base", os.path.abspath(args.base_root)))
    levels = [int(x) for x in args.levels.split(",") if x]
    load_before = os.getloadavg()
    clients, server_cores = core_split(args.client_cores)
    rows: list[dict[str, Any]] = []
    out = out_dir() / "grpc_call_cpu.json"
    with EmbeddedServer(model=args.model, variant=args.variant, cpus=server_cores) as srv, \
            tempfile.TemporaryDirectory() as tmp:
        pin_clients(clients, server_cores)
        payload = _payload(srv.http_url, args.model)
        capture = os.path.join(tmp, "capture.pkl")
        Path(capture).write_bytes(pickle.dumps(_capture(payload.address, payload)))
        print(f"== {args.model} on embedded Triton (gRPC {payload.address}); load average "
              f"{load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; {os.cpu_count()} CPUs", flush=True)
        runs = [(name, root, "real", level) for level in levels for name, root in roots]
        runs += [("floor", str(ROOT), "floor", 1)] + [(name, root, "replay", 1) for name, root in roots]
        for rnd in range(args.rounds):
            for name, root, arm, level in runs if rnd % 2 == 0 else list(reversed(runs)):
                calls = args.replay_calls if arm == "replay" else args.calls
                row = {"round": rnd, "name": name, "arm": arm, "level": level,
                       **_child(arm, root, capture, calls, level), "load1": round(os.getloadavg()[0], 2)}
                rows.append(row)
                print(json.dumps(row), flush=True)
                out.write_text(json.dumps({"args": vars(args), "load_before": load_before, "rows": rows}, indent=1))
    load_after = os.getloadavg()
    print()
    print("| arm | c | user µs/call per round | system µs/call per round | total µs/call, mean | calls/s, mean |")
    print("|---|---|---|---|---|---|")
    for name, _, arm, level in runs:
        got = [r for r in rows if r["name"] == name and r["arm"] == arm and r["level"] == level and r["ok"]]
        if not got:
            print(f"| {_label(name, arm)} | {level} | failed | | | |")
            continue
        user = ", ".join(f"{r['user_us']:.1f}" for r in got)
        system = ", ".join(f"{r['sys_us']:.1f}" for r in got) if arm != "replay" else "-"
        total = sum(r["user_us"] + r["sys_us"] for r in got) / len(got)
        rate = f"{sum(r['calls_s'] for r in got) / len(got):,.0f}" if arm != "replay" else "-"
        print(f"| {_label(name, arm)} | {level} | {user} | {system} | {total:.1f} | {rate} |")
    print(f"\nload average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, after "
          f"{load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} (1, 5, 15 min); {os.cpu_count()} CPUs")
    return 0


# -- the child side (its own process: the root's engine on sys.path)


def _with_stream(answer: bytes, sid: int) -> bytes:
    """``answer``'s frames with every non-zero stream id set to ``sid``."""
    out, at = bytearray(answer), 0
    while at + 9 <= len(out):
        if int.from_bytes(out[at + 5 : at + 9], "big"):
            out[at + 5 : at + 9] = sid.to_bytes(4, "big")
        at += 9 + int.from_bytes(out[at : at + 3], "big")
    return bytes(out)


def _worker(loop_selector: Any, level: int) -> Any:
    import socket
    from multiprocessing.connection import Connection as Pipe

    from engine.load.ticks import LevelPlan
    from engine.load.worker import Worker

    mine, _theirs = socket.socketpair()
    w = Worker(0, Pipe(mine.detach()), loop_selector)
    w.plan = LevelPlan(0, "concurrency", 10**9, 10 * 10**9, slots=level)
    w.checked = True
    return w, _theirs


def _replay(capture: dict[str, Any], calls: int) -> dict[str, Any]:
    import asyncio

    from engine.load.worker import TickBuffer
    from engine.triton.transports import grpc

    class Counted:
        arrived_ns = 0
        writes = 0

        def write(self, data: bytes) -> None:
            self.writes += 1

        def abort(self) -> None:
            pass

        def get_write_buffer_size(self) -> int:
            return 0

    async def go() -> dict[str, Any]:
        w, keep = _worker(None, 1)
        dialer = grpc.GrpcDialer(w, capture["payload"])
        w.dialer = dialer
        call = dialer.connection()
        link = grpc.GrpcLink(dialer)
        link.attach(call)
        link.connection_made(Counted())  # type: ignore[arg-type]  # a transport's part a link uses
        link.data_received(capture["hello"])
        call.connected, w.running, w.generation = True, True, call.generation
        w.tick_buffer = TickBuffer(0, 0, 0, 10**15, False)
        answers = [_with_stream(capture["answers"][1], 3 + 2 * k) for k in range(calls)]
        call.send()
        link.data_received(_with_stream(capture["answers"][0], 1))
        feed = link.data_received
        t0 = time.process_time_ns()
        for answer in answers:
            feed(answer)
        t1 = time.process_time_ns()
        ok = len(w.tick_buffer.lat)
        if ok != calls + 1 or w.tick_buffer.errors:
            raise RuntimeError(f"{ok} answers of {calls + 1}, errors {w.tick_buffer.errors}")
        keep.close()
        return {"user_us": (t1 - t0) / calls / 1000, "sys_us": 0.0, "calls_s": 0.0}

    return asyncio.run(go())


def _real(capture: dict[str, Any], calls: int, level: int) -> dict[str, Any]:
    import asyncio
    import resource

    from engine.load.worker import PreciseEpollSelector, TickBuffer, new_event_loop
    from engine.triton.transports import grpc

    async def go(selector: PreciseEpollSelector) -> dict[str, Any]:
        w, keep = _worker(selector, level)
        dialer = grpc.GrpcDialer(w, capture["payload"])
        w.dialer = dialer
        conns = [dialer.connection() for _ in range(level)]
        error = await dialer.open(conns, 0)  # type: ignore[arg-type]
        if error is not None:
            raise RuntimeError(f"connect: {error}")
        w.running = True
        w.tick_buffer = ticks = TickBuffer(0, 0, 0, 10**15, False)
        done = asyncio.Event()
        warm = calls // 10
        marks: dict[str, tuple[int, Any, float]] = {}

        def watch() -> None:
            n = len(ticks.lat)
            if n >= warm and "from" not in marks:
                marks["from"] = (n, resource.getrusage(resource.RUSAGE_SELF), time.monotonic())
            if n >= warm + calls:
                marks["to"] = (n, resource.getrusage(resource.RUSAGE_SELF), time.monotonic())
                w.running = False
                done.set()
                return
            w.loop.call_later(0.01, watch)

        watch()
        for conn in conns:
            conn.send()
        await asyncio.wait_for(done.wait(), 300)
        (n0, r0, m0), (n1, r1, m1) = marks["from"], marks["to"]
        if ticks.errors:
            raise RuntimeError(f"errors {ticks.errors}")
        keep.close()
        n = n1 - n0
        return {"user_us": (r1.ru_utime - r0.ru_utime) / n * 1e6, "sys_us": (r1.ru_stime - r0.ru_stime) / n * 1e6,
                "calls_s": n / (m1 - m0)}

    selector = PreciseEpollSelector()
    loop = new_event_loop(selector)
    try:
        return loop.run_until_complete(go(selector))
    finally:
        loop.close()


def _floor(capture: dict[str, Any], calls: int) -> dict[str, Any]:
    import asyncio
    import resource
    import socket

    from engine.load.worker import PreciseEpollSelector, new_event_loop
    from engine.net import http2
    from engine.net.stamped_socket import StampedSocket
    from engine.triton.transports.grpc import request_headers

    payload = capture["payload"]
    host, port = payload.address.rsplit(":", 1)
    head = http2.encode_headers(request_headers(payload.address, False, payload.metadata))
    message = b"\x00" + len(payload.requests[0]).to_bytes(4, "big") + payload.requests[0]
    warm = calls // 10
    result: dict[str, Any] = {}

    class Floor:
        def __init__(self, done: asyncio.Event) -> None:
            self.done, self.sid, self.n = done, 1, 0
            self.tr: Any = None
            self.mark: tuple[Any, float] | None = None

        def connection_made(self, tr: Any) -> None:
            self.tr = tr
            tr.write(http2.PREFACE + http2.settings_frame({http2.ENABLE_PUSH: 0, http2.INITIAL_WINDOW_SIZE: 1 << 30})
                     + http2.window_update(0, (1 << 30) - http2.DEFAULT_WINDOW))

        def send(self) -> None:
            stream = self.sid.to_bytes(4, "big")
            self.sid += 2
            self.tr.write(b"".join((len(head).to_bytes(3, "big"), b"\x01\x04", stream, head,
                                    len(message).to_bytes(3, "big"), b"\x00\x01", stream, message)))

        def data_received(self, data: bytes) -> None:
            if self.sid == 1:  # the server's SETTINGS
                self.tr.write(http2.frame(http2.SETTINGS, http2.ACK, 0))
                self.send()
                return
            if b"\x01\x05" not in data:  # no trailers (HEADERS, END_STREAM | END_HEADERS) in it
                return
            self.n += 1
            if self.n == warm:
                self.mark = (resource.getrusage(resource.RUSAGE_SELF), time.monotonic())
            if self.n == warm + calls and self.mark is not None:
                r1, m1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
                r0, m0 = self.mark
                result.update(user_us=(r1.ru_utime - r0.ru_utime) / calls * 1e6,
                              sys_us=(r1.ru_stime - r0.ru_stime) / calls * 1e6, calls_s=calls / (m1 - m0))
                self.done.set()
                return
            self.send()

        def connection_lost(self, exc: BaseException | None) -> None:
            self.done.set()

    async def go() -> None:
        done = asyncio.Event()
        sock = socket.create_connection((host.strip("[]"), int(port)))
        sock.setblocking(False)
        stamped = StampedSocket(asyncio.get_running_loop(), sock, Floor(done))
        await asyncio.wait_for(done.wait(), 300)
        stamped.abort()

    selector = PreciseEpollSelector()
    loop = new_event_loop(selector)
    try:
        loop.run_until_complete(go())
    finally:
        loop.close()
    if not result:
        raise RuntimeError("the floor's connection closed early")
    return result


def child(argv: list[str]) -> int:
    arm, root, capture_path, calls, level = argv[0], argv[1], argv[2], int(argv[3]), int(argv[4])
    sys.path[0] = root  # that checkout's engine, ahead of any other (and not this script's folder)
    capture = pickle.loads(Path(capture_path).read_bytes())
    if arm == "replay":
        got = _replay(capture, calls)
    elif arm == "real":
        got = _real(capture, calls, level)
    else:
        got = _floor(capture, calls)
    print(json.dumps(got))
    return 0


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--child":
    sys.exit(child(sys.argv[2:]))
