"""`gpuscale-tui export`: a recording as json, csv (perf_analyzer's columns), md or html; a study's
index as one report for all its configs and the data of each recording."""

from __future__ import annotations

import argparse
from pathlib import Path

from tui.commands.exits import print_notes


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="export a recording: json, csv (perf_analyzer columns), md, html")
    p.add_argument("file", type=Path, help="a recording (.sqlite)")
    from engine.record.exporters import (
        EXPORTERS,  # here, not at import: main() checks the Python first
    )

    p.add_argument("--format", "-f", choices=tuple(EXPORTERS), action="append", required=True,
                   help="json, csv, md or html; repeat for several")
    p.add_argument("--out", type=Path, default=None, metavar="DIR", help="output folder, one file per format (default: beside the file)")


def run(args: argparse.Namespace) -> int:
    from engine.record.exporters import export
    from engine.record.reader import Recording
    from engine.study.index import is_index
    from tui.commands.export_out import check_out_folder

    check_out_folder(args.out)
    out_dir = args.out or args.file.parent
    if is_index(args.file):  # a study: one report for all its configs; data per recording
        from engine.study.figures import study_figures
        from engine.study.index import read_index, recording_paths
        from engine.study.study_report import export_study

        for fmt in dict.fromkeys(args.format):
            if fmt in ("md", "html"):
                print(export_study(study_figures(args.file), fmt, out_dir))
            else:
                for _variant, path in recording_paths(read_index(args.file), args.file):
                    print(export(Recording.open(path), fmt, out_dir))
        return 0
    recording = Recording.open(args.file)
    print_notes([recording])
    for fmt in dict.fromkeys(args.format):
        print(export(recording, fmt, out_dir))
    return 0

