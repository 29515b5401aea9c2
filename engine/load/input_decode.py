"""An input-data JSON document decoded with a stated peak: every flat list of numbers longer than
a few hundred characters becomes a numpy array straight from the text (``Numbers``), never a
Python list of Python numbers (about 15 times the text in memory), and the rest is parsed by the
standard JSON decoder.

The peak of a decode is the file's bytes, plus the arrays (at most 8 bytes per number: float64
for float literals, the narrowest integer type that holds the integer literals), plus the rest of
the document as Python objects (small: names, shapes, strings, b64 text). A number takes at
least 2 characters with its comma, so the arrays take at most 4 times the text they replace, and
about 1 time for typical FP32 data ("0.1234567,"). The arrays' total is checked against
``MAX_NUMBERS_BYTES`` while decoding, before any is kept past its limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import UserError

MIN_TEXT = 256  # shorter lists of numbers stay Python lists: too small to matter
MAX_NUMBERS_BYTES = 2 << 30  # the decoded arrays together; more is refused while decoding
MARK = "\u0000gpuscale-numbers"  # the key of the object that stands for an array in the text

# a list holding only what numbers are written with (then checked: numpy is no JSON parser)
_LIST = re.compile(rb"\[[0-9eE+\-.,\s]*\]")
PIECE = 1 << 20  # a list's text is converted this many bytes at a time: its Python numbers stay few


@dataclass(frozen=True)
class Numbers:
    """A JSON list of numbers, decoded into one array."""

    array: np.ndarray  # float64 when any literal has a fraction or exponent, else an integer type
    int_literals: bool  # some literal is written as an integer (perf_analyzer refuses these for floats)

    def __len__(self) -> int:
        return int(self.array.size)


class Stopped(Exception):
    """The decode was asked to stop (the session is stopping): nothing is returned."""


def decode_document(raw: bytes, where: str, stopped: Callable[[], bool] = lambda: False) -> Any:
    """The JSON document of ``raw``, long lists of numbers as ``Numbers``. Bad JSON is one line.
    ``stopped`` is asked between pieces (about a megabyte each): when it says so, ``Stopped``."""
    arrays: list[Numbers] = []
    total = 0
    seen, quotes = 0, 0  # where the text was read up to, and the string quotes in it

    def swap(match: re.Match[bytes]) -> bytes:
        nonlocal total, seen, quotes
        if stopped():
            raise Stopped
        text = match.group()
        quotes += _quotes(raw, seen, match.start())
        seen = match.end()
        if len(text) < MIN_TEXT or quotes % 2:  # short, or inside a string: text, not numbers
            return text
        numbers = _numbers(text[1:-1], stopped)
        if numbers is None:
            return text
        total += numbers.array.nbytes
        if total > MAX_NUMBERS_BYTES:
            raise UserError(f"{where}: its numbers take over {MAX_NUMBERS_BYTES >> 30} GiB as arrays: use fewer "
                            "entries, or b64 for large tensors")
        arrays.append(numbers)
        return b'{"\\u0000gpuscale-numbers":%d}' % (len(arrays) - 1)

    try:
        compact = _LIST.sub(swap, raw).decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{where}: not JSON (not UTF-8 text)") from None

    def hook(pairs: list[tuple[str, Any]]) -> Any:
        if len(pairs) == 1 and pairs[0][0] == MARK and isinstance(pairs[0][1], int) and 0 <= pairs[0][1] < len(arrays):
            return arrays[pairs[0][1]]
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


def _numbers(inner: bytes, stopped: Callable[[], bool]) -> Numbers | None:
    """The numbers of a list's text (without its brackets); None where the text is not JSON's
    numbers as numpy would read them (then the JSON decoder reads it, and names any error)."""
    text = inner.strip()
    if not text or _not_json_numbers(text):
        return None
    count = text.count(b",") + 1
    floats = any(c in text for c in (b".", b"e", b"E"))
    convert = float if floats else int
    array = np.empty(count, np.float64 if floats else np.int64)
    done, at, int_literals = 0, 0, not floats
    try:
        while at < len(text):
            if stopped():
                raise Stopped
            end = len(text) if len(text) - at <= PIECE else text.index(b",", at + PIECE)
            piece = text[at:end]
            tokens = piece.split(b",")
            array[done:done + len(tokens)] = np.fromiter(map(convert, tokens), array.dtype, len(tokens))
            int_literals = int_literals or _int_literals(piece, tokens)
            done, at = done + len(tokens), end + 1
    except (ValueError, OverflowError):  # "1..2", "--1", an integer past int64
        return None
    if not floats:
        low, high = int(array.min()), int(array.max())
        array = array.astype(np.result_type(np.min_scalar_type(low), np.min_scalar_type(high)))
    return Numbers(array, int_literals)


def _not_json_numbers(text: bytes) -> bool:
    """What float() and int() take and JSON does not: a '+' but in an exponent, a '.' without a
    digit on each side, an empty element, underscores (not in the pattern), spaces inside a number."""
    if b"+" in text and text.count(b"+") != text.count(b"e+") + text.count(b"E+"):
        return True
    if b"." in text and any(bad in text for bad in (b".,", b",.", b"-.", b". ", b" .", b".e", b".E")):
        return True
    return text.startswith(b".") or text.endswith((b".", b",")) or b",," in text


def _int_literals(piece: bytes, tokens: list[bytes]) -> bool:
    """Whether some element is written as an integer (no '.', no exponent). Every element holding
    a '.' (one at most each) says no at once; else each element is looked at."""
    if piece.count(b".") == len(tokens):
        return False
    return any(b"." not in t and b"e" not in t and b"E" not in t for t in tokens)
