"""Every command's --help and the error lines of a few bad inputs, byte for byte as a fixture holds
them (tests/tui/data/cli_words.txt): a move of modules (issue 55's rooms) changes no word a user reads.

After a deliberate change of words, write the fixture again:
``python -m tests.tui.test_cli_words_fixed --write``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

FIXTURE = Path(__file__).parent / "data" / "cli_words.txt"

# (name, profile text or None, argv): each fails before any server or load is touched
BAD_INPUTS: list[tuple[str, str | None, list[str]]] = [
    ("unknown flag", None, ["--bogus"]),
    ("unknown profile", None, ["run", "--profile", "nosuch"]),
    ("unknown transport", '[load]\ntransport = "nope"\n', ["run", "--profile", "{profile}", "--headless"]),
    ("missing input data", None, ["run", "--input-data", "{tmp}/nosuch.json", "--headless"]),
    ("missing recording", None, ["replay", "{tmp}/nosuch.jsonl"]),
    ("compare without files", None, ["compare"]),
    ("merge without files", None, ["merge"]),
    ("model action", None, ["model", "nosuch"]),
]


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def collect() -> str:
    """The words: each parser's help, then each bad input's exit code and stderr."""
    from tui.cli import build_parser, main

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal's width
    out: list[str] = []
    try:
        for path, parser in _parsers(build_parser()):
            out.append(f"=== help: {' '.join(path) or '(top)'}\n{parser.format_help()}")
        with tempfile.TemporaryDirectory() as tmp:
            for name, profile, argv in BAD_INPUTS:
                profile_path = Path(tmp) / "profile.toml"
                if profile is not None:
                    profile_path.write_text(profile)
                args = [a.format(profile=profile_path, tmp=tmp) for a in argv]
                err = io.StringIO()
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    try:
                        code = main(args)
                    except SystemExit as exc:
                        code = exc.code if isinstance(exc.code, int) else 1
                out.append(f"=== error: {name} (exit {code})\n{err.getvalue().replace(tmp, '<tmp>')}")
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "".join(out)


def test_help_and_error_lines_are_the_fixtures_words() -> None:
    now = collect()
    want = FIXTURE.read_text()
    if now != want:
        import difflib

        diff = "".join(difflib.unified_diff(want.splitlines(True), now.splitlines(True), "fixture", "now", n=1))
        raise AssertionError(f"the CLI's words changed (write the fixture again if meant):\n{diff[:6000]}")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    FIXTURE.write_text(collect())
    print(f"wrote {FIXTURE}")
