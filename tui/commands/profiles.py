"""`gpuscale-tui profiles`: the bundled profiles, one line each, or one profile file validated."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("profiles", help="list the bundled profiles, one line each")
    p.add_argument("--check", metavar="PATH", help="validate a profile file and exit")


def run(args: argparse.Namespace) -> int:
    from engine.profiles import bundled_profiles, load_profile

    if args.check:
        profile = load_profile(args.check)
        print(f"{args.check}: ok ({profile.name})")
        return 0
    for path in bundled_profiles():
        p = load_profile(str(path))
        hw = p.hardware
        gpus = f"{hw.gpu_count}x {hw.gpu_model}" if hw.gpu_count else "this machine"
        cost = f"${hw.cost_per_hour:.2f}/h" if hw.cost_per_hour else "-"
        print(f"{p.name:<20} {gpus:<24} {cost:>9}  {p.description}")
    return 0
