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
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import UserError

MIN_TEXT = 256  # shorter lists of numbers stay Python lists: too small to matter
MAX_NUMBERS_BYTES = 2 << 30  # the decoded arrays together; more is refused while decoding
MARK = "\u0000gpuscale-numbers"  # the key of the object that stands for an array in the text

_WS = rb"[ \t\r\n]*"
_NUM = rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"  # JSON's number grammar exactly
_LIST = re.compile(rb"\[" + _WS + _NUM + rb"(?:" + _WS + rb"," + _WS + _NUM + rb")*" + _WS + rb"\]")
_INT_LITERAL = re.compile(rb"(?:^|,)" + _WS + rb"-?[0-9]+" + _WS + rb"(?=,|$)")
_LONG_INT = re.compile(rb"[0-9]{19}")  # may not fit int64: left to the JSON decoder


@dataclass(frozen=True)
class Numbers:
    """A JSON list of numbers, decoded into one array."""

    array: np.ndarray  # float64 when any literal has a fraction or exponent, else an integer type
    int_literals: bool  # some literal is written as an integer (perf_analyzer refuses these for floats)

    def __len__(self) -> int:
        return int(self.array.size)


def decode_document(raw: bytes, where: str) -> Any:
    """The JSON document of ``raw``, long lists of numbers as ``Numbers``. Bad JSON is one line."""
    arrays: list[Numbers] = []
    total = 0

    def swap(match: re.Match[bytes]) -> bytes:
        nonlocal total
        text = match.group()
        if len(text) < MIN_TEXT or _LONG_INT.search(text):
            return text
        numbers = _numbers(text[1:-1])
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


def _numbers(inner: bytes) -> Numbers | None:
    """The numbers of a list's text (without its brackets); None where numpy reads them otherwise
    than JSON would (then the JSON decoder does)."""
    count = inner.count(b",") + 1
    floats = any(c in inner for c in (b".", b"e", b"E"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy < 2.3 warns, where later ones raise, on text it cannot read
            array = np.fromstring(inner, dtype=np.float64 if floats else np.int64, sep=",")
    except (ValueError, DeprecationWarning):
        return None
    if array.size != count:
        return None
    if not floats and array.size:
        low, high = int(array.min()), int(array.max())
        array = array.astype(np.result_type(np.min_scalar_type(low), np.min_scalar_type(high)))
    return Numbers(array, not floats or bool(_INT_LITERAL.search(inner)))
