"""Text from outside (a server's error, a GPU UUID from a remote /metrics, a model name, a
recording) made safe for the place it is written to (pure):

- a CSV cell that a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, tab, CR at
  its start) gets a leading ``'`` (OWASP's advice); a number such as ``-1.5`` stays a number;
- Markdown loses raw HTML (``<script>``), control characters and the line breaks that would
  start a heading, a list or a table row;
- a terminal line loses escape sequences and other control characters (shown as ``\\x1b`` ...),
  so that a recording or a server cannot move the cursor, retitle the window or hide text.
"""

from __future__ import annotations

import re

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
# C0 controls but tab and newline, DEL, and the C1 controls (a lone 0x9b is a CSI on some terminals)
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")  # what opens raw HTML; "<0.001" stays as it reads
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def csv_cell(text: str) -> str:
    """A CSV cell that no spreadsheet evaluates."""
    text = str(text)
    if text.startswith(_FORMULA_START) and not _NUMBER.match(text):
        return "'" + text
    return text


def md_text(text: str) -> str:
    """Markdown inline text: HTML escaped, one line, table pipes escaped, control characters shown
    (a report is read with `cat` too)."""
    one_line = terminal_text(str(text), keep_newlines=False)
    return _TAG_START.sub("&lt;", one_line).replace("|", "\\|")


def terminal_text(text: str, *, keep_newlines: bool = True) -> str:
    """Text for a terminal: control characters shown, not obeyed."""
    text = str(text)
    if not keep_newlines:
        text = " ".join(text.splitlines())
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)
