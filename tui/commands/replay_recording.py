"""`gpuscale-tui replay`: a recording, or a study's index, in the TUI (play, pause, speed, seek),
or its events as headless lines."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tui.commands.exits import PROG, shown
from tui.commands.flags import positive_float

REPLAY_IDLE_S = 5.0  # headless replay of a file without an end: a live writer commits every 0.5 s


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("replay", help="show a recording in the TUI (play, pause, speed, seek)")
    p.add_argument("file", type=Path, help="a recording (.sqlite), e.g. recordings/cpu_0gpu_local_<time>.sqlite")
    p.add_argument("--speed", type=positive_float, default=1.0, help="start speed (1, 2, 10, ...)")
    p.add_argument("--headless", action="store_true", help="print the recording's events as the headless mode does")


def run(args: argparse.Namespace) -> int:
    from engine.record.replay_source import ReplaySource
    from engine.study.index import is_index

    if is_index(args.file):
        return _replay_study(args)
    # no terminal to draw on (a pipe, a log file, CI): print the events, as `run` does
    headless = args.headless or not sys.stdout.isatty()
    if headless:
        from tui.commands.headless_session import run_headless

        # all events at once, then end: a crashed file (no end) is followed only while it grows
        return run_headless(ReplaySource(args.file, speed=None, linger=False, idle_timeout_s=REPLAY_IDLE_S), replay=True)
    source = ReplaySource(args.file, speed=args.speed)
    from tui.app import run_tui

    return run_tui(source, replay=source, title=f"{PROG} · replay {args.file.name}")


def _replay_study(args: argparse.Namespace) -> int:
    from engine.study.study_replay import StudyReplaySource

    study = StudyReplaySource(args.file, speed=None if args.headless else args.speed)
    if args.headless:
        from tui.study_headless import StudyPrinter

        printer = StudyPrinter()
        study.bus.subscribe(printer)
        study.start()
        study.join()
        printer.close()  # the lines still queued
        if study.error:
            print(f"{PROG}: error: {shown(study.error.splitlines()[0])}", file=sys.stderr)
        return study.exit_code
    from tui.study_app import run_study_tui

    run_study_tui(study, title=f"{PROG} · replay {args.file.name}", replay=study)
    return study.exit_code
