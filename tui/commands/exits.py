"""The tool's name, its exit codes, and errors and warnings as lines that are safe to print."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.record.reader import Recording

PROG = "gpuscale-tui"

EXIT_CODES = """\
exit codes:
  0    ok
  1    the run failed (a level failed or the sweep ended early, the server or a load worker
       died, the recording could not be written)
  2    bad input (profile, URL, model name, recording file, flag)
  3    a gate failed (gates.* in the profile, or compare's --min-*/--max-* flags)
  130  interrupted (Ctrl-C, SIGTERM, SIGHUP)"""


def shown(exc: BaseException | str) -> str:
    """An error for the screen: credentials in URLs or header-like text masked."""
    from engine.record.safe_text import terminal_text
    from engine.redact import Redactor

    return terminal_text(Redactor().text(str(exc)), keep_newlines=False)


def print_notes(recordings: Sequence[Recording]) -> None:
    """What the reader has to tell about each recording (a missing -wal file), as warnings."""
    for recording in recordings:
        for note in recording.notes:
            print(f"{PROG}: warning: {note}", file=sys.stderr)
