"""One-line summaries of a level's errors, for Warning and Error events."""

from __future__ import annotations


def errors_line(errors_by_kind: dict[str, int], messages: list[str]) -> str:
    """'rejected x12, timeout x3 (first: HTTP 400: ...)'."""
    parts = [f"{kind} x{n}" for kind, n in sorted(errors_by_kind.items(), key=lambda kv: (-kv[1], kv[0]))]
    text = ", ".join(parts) or "no errors"
    return f"{text} (first: {messages[0]})" if messages else text
