"""`gpuscale-tui check`: is this box fit for the run? Engine only: the GPU boxes this runs on have
no Textual."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("check", help="is this box fit for the run? PCIe links, power, throttling, other tenants, "
                                     "P2P/NVLink, bandwidth, host, the profile's [hardware]; exit 3 on a fail")
    p.add_argument("--profile", "-p", default="local", metavar="NAME|PATH",
                   help="compare the box with this profile's [hardware] block (default: local, declares none)")
    p.add_argument("--json", action="store_true", help="print the verdicts and the measured facts as JSON")
    p.add_argument("--quick", action="store_true", help="NVML and host readings only: no load, bandwidth or all-reduce")
    p.add_argument("--no-allreduce", action="store_true", help="skip the NCCL all-reduce")
    p.add_argument("--output", "-o", type=Path, default=Path("recordings"), metavar="DIR",
                   help="where recordings will go: its free disk is checked (default: recordings/)")


def run(args: argparse.Namespace) -> int:
    from engine.check.render import render_text, to_json
    from engine.check.run import expected_from_profile, run_check
    from engine.profiles import load_profile

    profile = load_profile(args.profile)
    progress = (lambda text: None) if args.json else (lambda text: print(f"check: {text} ...", file=sys.stderr, flush=True))
    check = run_check(expected_from_profile(profile), args.output, measure=not args.quick,
                      allreduce=not args.no_allreduce, progress=progress)
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None  # a log keeps the wide table
    print(to_json(check) if args.json else render_text(check, width))
    return 3 if check.verdict == "no-go" else 0
