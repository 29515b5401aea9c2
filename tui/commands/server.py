"""`gpuscale-tui server`: the embedded Triton server on its own, its URLs printed, until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import re
import threading
import time
from pathlib import Path

from engine.errors import RunFailed, UserError
from tui.commands.ports import parse_ports
from tui.commands.stop_signals import StopSignals


def server_variant(text: str) -> str:
    """auto, Nx (1x, 2x, ...), cpu or cpuK (cpu2): whether the model has it is checked when it starts."""
    name = text.strip().lower()
    if not re.fullmatch(r"auto|[1-9]\d*x|cpu(?:[1-9]\d*)?", name):
        raise argparse.ArgumentTypeError(f"unknown variant {text!r} (expected auto, Nx such as 2x, cpu or cpuK such as cpu2)")
    return name


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("server", help="start the embedded Triton server, print its URLs, stop on Ctrl-C "
                                      "(its log is kept in ~/.cache/gpuscale-tui/server-logs)")
    p.add_argument("--model", default="vit_tiny", metavar="NAME",
                   help="a model of model_repository/ (vit_tiny, identity, openclip_vit_b32, ...; default: vit_tiny)")
    p.add_argument("--variant", default="auto", type=server_variant, metavar="auto|Nx|cpu|cpuK",
                   help="model config: Nx spreads instances over N GPUs, cpuK runs K CPU instances (cpu2); "
                        "auto: every GPU here, or cpu (default: auto)")
    p.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS", help="listen address (default: loopback only)")
    p.add_argument("--http-port", type=int, default=None, metavar="PORT", help="HTTP port (default: a free one)")
    p.add_argument("--ports", type=parse_ports, default=None, metavar="default|HTTP,GRPC,METRICS",
                   help="all three ports: 'default' is Triton's 8000,8001,8002 (default: free ones)")
    p.add_argument("--mps", default="auto", choices=("auto", "on", "off"),
                   help="on GPUs, run under a private MPS daemon so the model instances share each GPU "
                        "(default: auto, where nvidia-cuda-mps-control is found)")


def run(args: argparse.Namespace) -> int:
    from engine.profiles import check_bind_address
    from engine.server.embedded import EmbeddedServer

    check_bind_address(args.bind)
    if args.ports and args.http_port is not None:
        raise UserError("--ports and --http-port: give one of them")
    if args.http_port is not None and not 0 < args.http_port < 65536:
        raise UserError(f"--http-port: expected 1-65535, found {args.http_port}")
    # the log outside the server's work folder, which goes when it stops: the printed path stays true
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    log_dir = cache / "gpuscale-tui" / "server-logs" / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    server = EmbeddedServer(model=args.model, variant=args.variant, bind_address=args.bind, http_port=args.http_port,
                            mps=args.mps, log_dir=log_dir, ports=args.ports)
    done = threading.Event()
    signals = StopSignals(done.set)
    print(f"starting embedded Triton ({args.model}, variant {args.variant}) ...", flush=True)
    with server:
        print(f"HTTP     {server.http_url}\ngRPC     {server.grpc_url}\nmetrics  {server.metrics_url}")
        print(f"model    {args.model} (variant {server.variant})\nlog      {server.log_path} (kept after it stops)")
        if server.prepared and server.prepared.gpus:
            print(f"MPS      {'on' if server.mps_used else 'off'}: {server.mps_why}")
        print("Ctrl-C stops the server.", flush=True)
        while not done.wait(0.5):
            if not server.alive():
                raise RunFailed(f"tritonserver exited ({server.exit_reason()}); log: {server.log_path}")
    print(f"server stopped; its log: {server.log_path}")
    return 130 if signals.count else 0  # stopped by Ctrl-C, SIGTERM or SIGHUP: interrupted
