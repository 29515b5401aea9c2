"""`gpuscale-tui merge`: recordings of one plan run on several load hosts at one instant (a
Kubernetes Job, SLURM, pdsh) as one recording, which replays, exports and compares like any."""

from __future__ import annotations

import argparse
from pathlib import Path

from tui.commands.exits import EXIT_CODES


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("merge", help="merge recordings of one plan run on several load hosts at one instant",
                       epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", type=Path, nargs="+", metavar="FILE",
                   help="two or more recordings (.sqlite) of the same plan, one per load host, started together")
    p.add_argument("-o", "--out", type=Path, required=True, metavar="FILE",
                   help="the merged recording: a new file (never over an existing one)")


def run(args: argparse.Namespace) -> int:
    from engine.record.merge import merge_recordings

    path, levels, hosts = merge_recordings(args.files, args.out)
    print(f"{path}: {levels} level{'s' if levels != 1 else ''} merged from {len(hosts)} hosts ({', '.join(hosts)})")
    return 0
