""""Did you mean ...?": the closest known name to a mistyped one, for one-line errors."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The known name nearest to ``word`` (difflib's ratio of at least 0.6), or None."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """" (did you mean 'concurrency'?)" for an error line, or "" when nothing is close."""
    match = closest(word, choices)
    return f" (did you mean {match!r}?)" if match is not None and match != word else ""
