"""`gpuscale-tui`: the command line: its parser, and each command handed to its module
(tui/commands/).

Only argparse and the profile schema are imported to parse flags, so --help is instant; torch,
textual and the engines load only for the command that needs them. Every bad input ends as one
line on stderr and exit code 2; a failed run exits 1, failed gates 3, an interrupted run 130.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from engine.errors import RunFailed, UserError
from tui.commands import (
    check,
    compare,
    data,
    export_recording,
    init,
    merge,
    model,
    profiles,
    replay_recording,
    run,
    server,
    study,
)
from tui.commands.exits import EXIT_CODES, PROG, shown
from tui.commands.stop_signals import interrupt_on_term

__all__ = ["EXIT_CODES", "MIN_PYTHON", "PROG", "build_parser", "main"]

MIN_PYTHON = (3, 11)  # engine/profiles reads TOML with tomllib; keep in step with pyproject's requires-python


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpuscale-tui")
    except PackageNotFoundError:
        return "unknown (not installed: a source checkout)"


class VersionAction(argparse.Action):
    """--version, read from the installed package's metadata only when asked for."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        print(f"{PROG} {tool_version()}")  # stdout, as argparse's own version action does
        parser.exit(0)


Command = Callable[[argparse.Namespace], int]

# Each command's runner; no command at all runs a session, as `run` does.
COMMANDS: dict[str | None, Command] = {
    None: run.run,
    "run": run.run,
    "check": check.run,
    "study": study.run,
    "profiles": profiles.run,
    "replay": replay_recording.run,
    "export": export_recording.run,
    "compare": compare.run,
    "merge": merge.run,
    "model": model.run,
    "data": data.run,
    "server": server.run,
    "init": init.run,
}
# Each command's flags, in the order --help lists the commands.
PARSERS = (run, check, study, profiles, replay_recording, export_recording, compare, merge, model, data, server, init)
# Commands without a session to stop: SIGTERM and SIGHUP interrupt them as Ctrl-C does (run, study
# and server install their own stop signals).
INTERRUPTED_ON_TERM = ("export", "compare", "merge", "profiles", "model", "data", "init")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Measure how Triton inference and torch training scale across GPUs, live in the terminal. "
        "With no arguments: an embedded Triton server on this machine, the `local` profile, the TUI.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction)
    run.add_flags(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for command in PARSERS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if sys.version_info < MIN_PYTHON:  # a source checkout run by an older Python: one line, not an ImportError
        found = ".".join(map(str, sys.version_info[:3]))
        print(f"{PROG}: error: needs Python {'.'.join(map(str, MIN_PYTHON))} or newer (this is {found})", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    if args.command in INTERRUPTED_ON_TERM:
        interrupt_on_term()
    try:
        return COMMANDS[args.command](args)
    except UserError as exc:
        print(f"{PROG}: error: {shown(exc)}", file=sys.stderr)
        return exc.exit_code
    except RunFailed as exc:
        print(f"{PROG}: failed: {shown(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a path the user gave: too long a name, a full disk, no permission
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"{PROG}: error: {where}{exc.strerror or shown(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
