"""`gpuscale-tui compare`: recordings (or studies) side by side, scaling and cost, and the gates of
its --min-*/--max-* flags (exit 3 when one fails)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.errors import UserError
from tui.commands.exits import EXIT_CODES, print_notes
from tui.commands.flags import one_box_price, parse_costs, positive_float


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compare", help="compare recordings side by side (1x vs 2x vs 4x, RTX 4080 vs A100)",
                       epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", type=Path, nargs="+", metavar="FILE",
                   help="two or more recordings (.sqlite); the 1x run of a GPU model is the base for scaling")
    p.add_argument("--format", "-f", choices=("text", "md", "html"), default="text")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="write the report to this new file (never over an existing one)")
    p.add_argument("--min-efficiency", type=positive_float, default=None, help="gate: fail below this scaling efficiency")
    p.add_argument("--min-throughput", type=positive_float, default=None, help="gate: fail below this many inferences/s")
    p.add_argument("--max-p99", action="append", default=[], metavar="LEVEL=MS", help="gate: p99 limit at a level")
    p.add_argument("--cost", action="append", default=[], metavar="GPUS=DOLLARS",
                   help="$/hr of a box with this many GPUs, e.g. --cost 1=3.5 --cost 4=14 (runs made on one big "
                        "box standing for smaller ones); replaces the profiles' cost_per_hour")
    p.add_argument("--scale-out-profile", default=None, metavar="NAME|PATH",
                   help="a one-GPU profile whose hardware.cost_per_hour prices each box of a scale-out run (1x*N); "
                        "--cost 1=DOLLARS wins")


def run(args: argparse.Namespace) -> int:
    from engine.analysis.gates import (
        describe_gates,
        evaluate_comparison_gates,
        gate_exit_code,
        gate_word,
        merge_gates,
        parse_p99_gates,
    )
    from engine.profiles import Gates

    gates = merge_gates(Gates(), min_throughput=args.min_throughput, max_p99_ms=parse_p99_gates(args.max_p99),
                        min_efficiency=args.min_efficiency)
    from engine.record.compare import compare, render_compare
    from engine.record.exporters import export_compare
    from engine.record.reader import Recording

    costs = parse_costs(args.cost)
    if args.out is not None and (args.out.exists() or args.out.is_symlink()):  # --out names a new file
        what = "a folder; --out takes the name of a new file" if args.out.is_dir() else "not overwriting it"
        raise UserError(f"--out {args.out}: already exists ({what})")
    from engine.study.index import is_index, read_index, recording_paths

    files: list[Path] = []
    one_box = one_box_price(args.scale_out_profile)
    study = False  # a study prices each config as its share of the box: so does its comparison
    for path in args.files:  # a study index stands for its finished variants' recordings
        if is_index(path):
            index = read_index(path)
            files += [p for v, p in recording_paths(index, path) if v in index.finished]
            study = True
            for gpus, dollars in index.costs.items():  # the study's own --cost, unless given again
                costs.setdefault(int(gpus), float(dollars))
            if one_box is None and index.scale_out_price:  # the study's own --scale-out-profile
                one_box = (index.scale_out_price, index.scale_out_price_from)
        else:
            files.append(path)
    recordings = [Recording.open(path) for path in files]
    print_notes(recordings)
    verdict = None
    if study and len(args.files) == 1:  # one study alone: its own verdict, so that both reports say the same
        from engine.study.figures import study_figures

        verdict = study_figures(args.files[0], costs).stop.reason
    comparison = compare(recordings, costs, pro_rata=study, study_verdict=verdict, scale_out_price=one_box)
    failures = evaluate_comparison_gates(gates, comparison)
    comparison.gates, comparison.gate_failures = describe_gates(gates), failures  # in the report too
    if args.out:
        print(export_compare(comparison, args.format, args.out.parent, args.out.name))
    else:
        from engine.record.safe_text import terminal_text

        text = render_compare(comparison, args.format)
        print(terminal_text(text) if args.format == "text" else text)
    for failure in failures:
        print(f"{gate_word(failure)}: {failure}", file=sys.stderr)
    return gate_exit_code(failures)
