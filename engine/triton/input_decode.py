"""An input-data JSON document decoded with a stated peak: every flat list of numbers longer than
a few hundred characters stays text in the file's bytes (``Numbers``: where it is, how many, of
what kind) and is converted once its tensor's datatype is known, a megabyte of text at a time,
straight into that datatype's array. Never a Python list of Python numbers (about 15 times the
text in memory); the rest of the document is parsed by the standard JSON decoder.

The peak of a read is the file's bytes, plus the prepared entries (each tensor's bytes, built
once), plus a piece's Python numbers and the rest of the document as Python objects (small:
names, shapes, strings, b64 text). A file's long lists may hold MAX_NUMBERS numbers in all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import UserError

MIN_TEXT = 256  # shorter lists of numbers stay Python lists: too small to matter
MAX_NUMBERS = 1 << 28  # numbers in a file's long lists (1 GiB as FP32, 2 GiB as FP64); more is refused
MARK = "\u0000gpuscale-numbers"  # the key of the object that stands for a list in the text

# a list holding only what numbers are written with (then checked: float() is no JSON parser)
_LIST = re.compile(rb"\[[0-9eE+\-.,\s]*\]")
_SPACE_INSIDE = re.compile(rb"[0-9.][ \t\r\n]+[0-9.\-]")  # "1 2": two numbers without a comma
PIECE = 1 << 20  # a list's text is converted this many bytes at a time: its Python numbers stay few


class Stopped(Exception):
    """The decode was asked to stop (the session is stopping): nothing is returned."""


class NotNumbers(ValueError):
    """An element of a long list that float() or int() does not take (``token``)."""

    def __init__(self, token: bytes) -> None:
        super().__init__(token)
        self.token = token


@dataclass(frozen=True)
class Numbers:
    """A JSON list of numbers: where its text is in the file, read when its datatype is known."""

    raw: bytes  # the whole file (shared, not copied)
    start: int  # the list's text, brackets left out: raw[start:end]
    end: int
    count: int
    floats: bool  # some element has a fraction or an exponent: read as float64, else as integers
    int_literals: bool  # some element is written as an integer (perf_analyzer refuses these for floats)
    stopped: Callable[[], bool] = lambda: False

    def __len__(self) -> int:
        return self.count

    def pieces(self) -> Iterator[np.ndarray]:
        """The numbers, a megabyte of text at a time: float64 when ``floats``, else int64 (or
        Python ints, dtype object, for a piece holding one past int64). NotNumbers for an
        element that is no number; Stopped when asked to stop."""
        at = self.start
        while at < self.end:
            if self.stopped():
                raise Stopped
            cut = self.end if self.end - at <= PIECE else self.raw.index(b",", at + PIECE, self.end)
            tokens = self.raw[at:cut].split(b",")
            yield _convert(tokens, self.floats)
            at = cut + 1

    def first(self) -> str:
        """The first element's text, for an error line."""
        cut = self.raw.find(b",", self.start, self.end)
        return self.raw[self.start:cut if cut >= 0 else self.end].strip().decode("ascii", "replace")[:40]


def _convert(tokens: list[bytes], floats: bool) -> np.ndarray:
    convert = float if floats else int
    try:
        return np.fromiter(map(convert, tokens), np.float64 if floats else np.int64, len(tokens))
    except OverflowError:  # an integer past int64 (UINT64's upper half, or one that fits nothing)
        return np.array([int(t) for t in tokens], dtype=object)
    except ValueError:
        for t in tokens:
            try:
                convert(t)
            except ValueError:
                raise NotNumbers(t.strip()[:40]) from None
        raise


def decode_document(raw: bytes, where: str, stopped: Callable[[], bool] = lambda: False) -> Any:
    """The JSON document of ``raw``, long lists of numbers as ``Numbers``. Bad JSON is one line.
    ``stopped`` is asked between lists and, once they are read, between pieces (about a megabyte
    each): when it says so, ``Stopped``."""
    lists: list[Numbers] = []
    total = 0
    seen, quotes = 0, 0  # where the text was read up to, and the string quotes in it

    def swap(match: re.Match[bytes]) -> bytes:
        nonlocal total, seen, quotes
        if stopped():
            raise Stopped
        quotes += _quotes(raw, seen, match.start())
        seen = match.end()
        if match.end() - match.start() < MIN_TEXT or quotes % 2:  # short, or inside a string: not numbers
            return match.group()
        numbers = _numbers(raw, match.start() + 1, match.end() - 1, stopped)
        if numbers is None:
            return match.group()
        total += numbers.count
        if total > MAX_NUMBERS:
            raise UserError(f"{where}: its lists hold over {MAX_NUMBERS:,} numbers: use fewer entries, or b64 for "
                            "large tensors")
        lists.append(numbers)
        return b'{"\\u0000gpuscale-numbers":%d}' % (len(lists) - 1)

    try:
        compact = _LIST.sub(swap, raw).decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{where}: not JSON (not UTF-8 text)") from None

    def hook(pairs: list[tuple[str, Any]]) -> Any:
        if len(pairs) == 1 and pairs[0][0] == MARK and isinstance(pairs[0][1], int) and 0 <= pairs[0][1] < len(lists):
            return lists[pairs[0][1]]
        return dict(pairs)

    try:
        return json.loads(compact, object_pairs_hook=hook)
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        raise UserError(f"{where}: not JSON ({msg} at line {getattr(exc, 'lineno', '?')})") from None
    except RecursionError:
        raise UserError(f"{where}: not JSON (nested too deep)") from None


def _quotes(raw: bytes, start: int, end: int) -> int:
    """The JSON string quotes in ``raw[start:end]`` (escaped ones left out), without copying it
    unless it holds an escaped backslash."""
    if raw.count(b"\\\\", start, end) == 0:
        return raw.count(b'"', start, end) - raw.count(b'\\"', start, end)
    text = raw[start:end].replace(b"\\\\", b"")
    return text.count(b'"') - text.count(b'\\"')


def _numbers(raw: bytes, start: int, end: int, stopped: Callable[[], bool]) -> Numbers | None:
    """What is known of the list at raw[start:end] without converting it; None where its text is
    not JSON's numbers (then the JSON decoder reads it, and names the error)."""
    while start < end and raw[start] in b" \t\r\n":
        start += 1
    while end > start and raw[end - 1] in b" \t\r\n":
        end -= 1
    if start == end or _not_json_numbers(raw, start, end):
        return None
    count = raw.count(b",", start, end) + 1
    floats = any(raw.find(c, start, end) >= 0 for c in (b".", b"e", b"E"))
    int_literals = not floats
    if floats and raw.count(b".", start, end) != count:  # some element has no point: look at each
        at = start
        while at < end and not int_literals:
            if stopped():
                raise Stopped
            cut = end if end - at <= PIECE else raw.index(b",", at + PIECE, end)
            int_literals = any(b"." not in t and b"e" not in t and b"E" not in t for t in raw[at:cut].split(b","))
            at = cut + 1
    return Numbers(raw, start, end, count, floats, int_literals, stopped)


def _not_json_numbers(raw: bytes, start: int, end: int) -> bool:
    """What float() and int() take and JSON does not: a '+' but in an exponent, a '.' without a
    digit on each side, an empty element, spaces inside a number."""
    plus = raw.count(b"+", start, end)
    if plus and plus != raw.count(b"e+", start, end) + raw.count(b"E+", start, end):
        return True
    if raw.find(b".", start, end) >= 0 and any(raw.find(bad, start, end) >= 0
                                               for bad in (b".,", b",.", b"-.", b". ", b" .", b".e", b".E")):
        return True
    if raw[start:start + 1] == b"." or raw[end - 1:end] in (b".", b",") or raw.find(b",,", start, end) >= 0:
        return True
    return _SPACE_INSIDE.search(raw, start, end) is not None
