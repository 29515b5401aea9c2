"""`gpuscale-tui init`: write a commented profile for a remote Triton (its URL, the box's GPUs
and price), checked as `profiles --check` checks it, never over an existing file."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from urllib.parse import urlsplit

from engine.errors import UserError

DEFAULT_URL = "http://127.0.0.1:8000"  # Triton's HTTP port, through an SSH tunnel
DEFAULT_FILE = Path("gpuscale.toml")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("init", help="write a commented profile for a remote Triton: its URL, the box's GPUs "
                                    "and price (then: --profile FILE)")
    p.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE, metavar="FILE",
                   help=f"the profile to write, a new file (default: {DEFAULT_FILE})")
    p.add_argument("--url", default=DEFAULT_URL, metavar="URL",
                   help=f"the server's HTTP URL (default: {DEFAULT_URL}, Triton's port through an SSH tunnel)")
    p.add_argument("--metrics-url", default=None, metavar="URL",
                   help="its /metrics URL, where the GPUs' utilization, memory and power come from "
                        "(default: port 8002 of the same host when the URL's port is 8000)")
    p.add_argument("--model", default="vit_tiny", metavar="NAME", help="the model to measure (default: vit_tiny)")
    p.add_argument("--gpus", type=int, default=1, metavar="N", help="GPUs of the box (default: 1)")
    p.add_argument("--gpu-model", default="GPU", metavar="TEXT", help='e.g. "RTX 4080", "H100" (default: GPU)')
    p.add_argument("--price", type=float, default=0.0, metavar="DOLLARS",
                   help="what the whole box costs per hour, in USD (default: 0, no cost figures)")
    p.add_argument("--name", default=None, help="the profile's name (default: the file's name)")


def default_metrics_url(url: str) -> str | None:
    """Triton's default layout: metrics on 8002 when HTTP is on 8000."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if port != 8000 or not parts.hostname:
        return None
    return parts._replace(netloc=parts.netloc.rpartition(":")[0] + ":8002", path="/metrics").geturl()


def profile_text(*, name: str, url: str, metrics_url: str | None, model: str, gpus: int, gpu_model: str,
                 price: float) -> str:
    q = json.dumps  # a TOML basic string: quotes and control characters escaped as JSON does
    metrics = (f"metrics_url = {q(metrics_url)}   # the GPUs' utilization, memory and power, from Triton's /metrics"
               if metrics_url else
               '# metrics_url = "http://HOST:8002/metrics"   # the GPUs\' utilization, memory and power (Triton\'s /metrics)')
    return f"""\
# A gpuscale-tui profile for a remote Triton server (written by `gpuscale-tui init`).
# Use it with: gpuscale-tui --profile THIS_FILE   (check it: gpuscale-tui profiles --check THIS_FILE)
# Every key is optional; README.md "Profile format" lists them all.
name = {q(name)}
description = {q(f"{gpus}x {gpu_model} at {url}")}

[hardware]                   # the box the server runs on: reports and recording names show it
gpu_model = {q(gpu_model)}
gpu_count = {gpus}
cost_per_hour = {price!r}          # USD for the whole box, what you pay: gives $ per 1000 images (0: none)

[server]
kind = "remote"
url = {q(url)}   # Triton's HTTP port (ssh -L 8000:127.0.0.1:8000 ... reaches a rented box)
{metrics}
# headers = {{ Authorization = "Bearer ..." }}   # sent with every request, never recorded

[model]
name = {q(model)}           # the model the server serves

[load]
concurrency = [1, 4, 8, 16, 32, 64]   # requests in flight, one level each
# window_ms = 5000           # perf_analyzer's measurement interval
# input_data = "photos.json" # real inputs (gpuscale-tui data from-images); random tensors otherwise
"""


def run(args: argparse.Namespace) -> int:
    from engine.profiles import load_profile
    from tui.commands.remote import check_url_flags

    path: Path = args.file
    if path.exists() or path.is_symlink():
        raise UserError(f"{path}: already exists (init never writes over a file; name a new one)")
    if args.gpus < 0:
        raise UserError(f"--gpus: expected a number of GPUs >= 0, found {args.gpus}")
    if not math.isfinite(args.price) or args.price < 0:
        raise UserError(f"--price: expected dollars per hour >= 0, found {args.price}")
    metrics = args.metrics_url or default_metrics_url(args.url)
    check_url_flags(argparse.Namespace(urls=[args.url], metrics_urls=[metrics] if metrics else []))
    name = args.name or (path.stem if path.suffix == ".toml" else path.name)
    text = profile_text(name=name, url=args.url, metrics_url=metrics, model=args.model, gpus=args.gpus,
                        gpu_model=args.gpu_model, price=args.price)
    partial = path.with_name(f".{path.name}.partial.toml")
    try:
        partial.write_text(text, encoding="utf-8")
        profile = load_profile(str(partial))  # a bad --url, --price ...: one line, nothing written
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    hw = profile.hardware
    print(f"{path}: profile {profile.name!r}, {hw.gpu_count}x {hw.gpu_model} at {profile.server.url}"
          f"{f', ${hw.cost_per_hour:.2f}/h' if hw.cost_per_hour else ''}")
    print(f"next: gpuscale-tui --profile {path}")
    return 0
