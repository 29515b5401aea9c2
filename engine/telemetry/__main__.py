"""``python -m engine.telemetry --seconds 10 [--metrics-url URL]``

Prints every telemetry event (topology, GPU and host samples, warnings) as JSON lines on
stdout, each one an event's ``to_dict()``; a short human summary goes to stderr at the end.
Needs neither textual nor tritonclient, so it runs as is on a bare GPU box.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any
from urllib.parse import urlsplit

from engine.errors import UserError
from engine.events import Event
from engine.telemetry.run_summary import TelemetrySummary
from engine.telemetry.sampler import MIN_INTERVAL_S, TelemetrySampler
from engine.telemetry.triton_metrics import TRITON_GPU_REFRESH_S

MAX_SECONDS = 7 * 24 * 3600


def _positive(name: str, minimum: float, maximum: float | None = None) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not minimum <= value or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
            raise argparse.ArgumentTypeError(f"{name} must be {bound}, got {text}")
        return value

    return parse


def _header(text: str) -> tuple[str, str]:
    key, sep, value = text.partition(":")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--header must look like 'Name: value', got {text!r}")
    return key.strip(), value.strip()


def _is_http_url(text: str) -> bool:
    try:
        parts = urlsplit(text)
        _ = parts.port  # raises on a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # exits with code 2 like argparse's, printed our way
        raise UserError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m engine.telemetry", description=__doc__.split("\n\n")[1])
    p.add_argument("--seconds", type=_positive("--seconds", 0.1, MAX_SECONDS), default=10.0, help="how long to sample")
    p.add_argument("--metrics-url", help="a Triton /metrics URL (remote GPUs), e.g. http://host:8002/metrics")
    p.add_argument("--metrics-interval", type=_positive("--metrics-interval", MIN_INTERVAL_S), default=TRITON_GPU_REFRESH_S,
                   help="the server's --metrics-interval-ms in seconds (default 2)")
    p.add_argument("--header", type=_header, action="append", default=[], help="'Name: value' for /metrics (repeatable)")
    p.add_argument("--nvml-interval", type=_positive("--nvml-interval", MIN_INTERVAL_S), default=1.0)
    p.add_argument("--host-interval", type=_positive("--host-interval", MIN_INTERVAL_S), default=1.0)
    p.add_argument("--no-nvml", action="store_true", help="skip local GPUs")
    p.add_argument("--quiet", action="store_true", help="no summary on stderr")
    return p


def run(argv: list[str] | None = None, out: Any = None, err: Any = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    args = build_parser().parse_args(argv)
    if args.metrics_url is not None and not _is_http_url(args.metrics_url):
        raise UserError(f"--metrics-url must be an http:// or https:// URL with a host, got {args.metrics_url!r}")
    summary = TelemetrySummary()
    lock = threading.Lock()

    def publish(event: Event) -> None:
        line = json.dumps(event.to_dict(), separators=(",", ":"))
        with lock:  # the sampler's threads publish concurrently
            summary.add(event)
            out.write(line + "\n")
            out.flush()

    sampler = TelemetrySampler(
        publish,
        nvml_interval_s=args.nvml_interval,
        host_interval_s=args.host_interval,
        metrics_url=args.metrics_url,
        metrics_headers=dict(args.header) or None,
        use_nvml=not args.no_nvml,
        metrics_interval_s=args.metrics_interval,
    )
    done = threading.Event()
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda *_: done.set()) if in_main else None  # stop = end early, cleanly
    sampler.start()
    try:
        done.wait(args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        sampler.stop()
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    if not args.quiet:
        with lock:
            err.write(summary.render() + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(argv)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `| head` closed the pipe: not an error of ours
        return 0


if __name__ == "__main__":
    sys.exit(main())
