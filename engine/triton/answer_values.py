"""An answer's output values against the validation data of the entry it answers (the input
data file's ``validation_data``): integers, BOOL and BYTES exactly, floats within a tolerance.

Only used when the input data has validation data; a sweep without it never reaches this
module. Equal bytes pass on one comparison; only a difference is looked at element by element
(with numpy for floats, imported when the first float output differs). Standard library
otherwise: load workers import it.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

# exact comparison: element size and struct code of the fixed-size types that are not floats
EXACT = {"BOOL": (1, "?"), "UINT8": (1, "B"), "INT8": (1, "b"), "UINT16": (2, "H"), "INT16": (2, "h"),
         "UINT32": (4, "I"), "INT32": (4, "i"), "UINT64": (8, "Q"), "INT64": (8, "q")}
FLOATS = {"FP16": "<f2", "FP32": "<f4", "FP64": "<f8", "BF16": "<u2"}  # BF16: its bits, widened below
SHOWN = 40  # characters of a value shown in an error line


@dataclass(frozen=True)
class Expected:
    """One output's expected contents for one request: raw little-endian bytes (BYTES as
    4-byte-length-prefixed elements), as the answer's binary data carries them."""

    datatype: str
    raw: bytes


def binary_layout(header_bytes: bytes) -> dict[str, tuple[int, int]] | None:
    """Each binary output's (offset, size) in the answer's binary part, from its JSON header
    (outputs follow each other in the header's order); None when the header is not that."""
    try:
        outputs = json.loads(header_bytes).get("outputs")
    except (ValueError, AttributeError, RecursionError):
        return None
    layout: dict[str, tuple[int, int]] = {}
    offset = 0
    for output in outputs if isinstance(outputs, list) else []:
        params = output.get("parameters") if isinstance(output, dict) else None
        size = params.get("binary_data_size") if isinstance(params, dict) else None
        if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
            layout[str(output.get("name"))] = (offset, size)
            offset += size
    return layout


def compare_output(name: str, want: Expected, got: bytes | bytearray | memoryview, tolerance: float) -> str | None:
    """One line on how output ``name`` differs from what was expected, or None."""
    if want.raw == got:
        return None
    if want.datatype == "BYTES":
        return _compare_bytes(name, want.raw, bytes(got))
    if want.datatype in FLOATS:
        return _compare_floats(name, want, bytes(got), tolerance)
    size, code = EXACT.get(want.datatype, (1, "B"))
    if len(got) != len(want.raw):
        return f"output {name!r}: {len(got) // size} elements, expected {len(want.raw) // size}"
    for index, (a, b) in enumerate(zip(struct.iter_unpack("<" + code, want.raw), struct.iter_unpack("<" + code, got),
                                       strict=True)):
        if a != b:
            return f"output {name!r} element {index}: expected {a[0]}, got {b[0]}"
    return None  # unreachable: the bytes differ, so some element does


def _compare_floats(name: str, want: Expected, got: bytes, tolerance: float) -> str | None:
    """Within ``tolerance``, relative and absolute: |got - want| <= tolerance * (1 + |want|); NaN
    matches NaN."""
    import numpy as np

    dtype = np.dtype(FLOATS[want.datatype])
    if len(got) != len(want.raw):
        return f"output {name!r}: {len(got) // dtype.itemsize} elements, expected {len(want.raw) // dtype.itemsize}"
    a, b = np.frombuffer(want.raw, dtype), np.frombuffer(got, dtype)
    if want.datatype == "BF16":  # the upper half of an FP32
        a, b = (a.astype(np.uint32) << 16).view(np.float32), (b.astype(np.uint32) << 16).view(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        close = (np.abs(b64 - a64) <= tolerance * (1 + np.abs(a64))) | (np.isnan(a64) & np.isnan(b64)) | (a64 == b64)
    if bool(close.all()):
        return None
    index = int(np.argmin(close))
    return f"output {name!r} element {index}: expected {a64[index]:.7g}, got {b64[index]:.7g} (tolerance {tolerance:g})"


def _compare_bytes(name: str, want: bytes, got: bytes) -> str:
    a, b = bytes_elements(want), bytes_elements(got)
    if b is None:
        return f"output {name!r}: BYTES data that is not length-prefixed elements"
    for index, (x, y) in enumerate(zip(a or [], b, strict=False)):
        if x != y:
            return f"output {name!r} element {index}: expected {_short(x)}, got {_short(y)}"
    return f"output {name!r}: {len(b)} elements, expected {len(a or [])}"


def bytes_elements(raw: bytes) -> list[bytes] | None:
    """BYTES elements of ``raw`` (each a 4-byte little-endian length, then its bytes); None when
    ``raw`` is not exactly that."""
    out, at = [], 0
    while at < len(raw):
        if at + 4 > len(raw):
            return None
        size = int.from_bytes(raw[at : at + 4], "little")
        if at + 4 + size > len(raw):
            return None
        out.append(raw[at + 4 : at + 4 + size])
        at += 4 + size
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."
