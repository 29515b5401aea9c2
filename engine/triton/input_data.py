"""load.input_data: real input values from a file or folder, read as perf_analyzer reads its
``--input-data`` (its docs/input_data.md), into entries of raw tensor bytes.

- A JSON file: ``{"data": [entry, ...], "validation_data": [entry, ...]}``. Each entry names
  every input (optional ones may be left out) with a flat list of values, ``{"content": [...],
  "shape": [...]}``, ``{"b64": "..."}`` or ``{"content": {"b64": "..."}, "shape": [...]}``.
  BYTES values are strings, or base64 of 4-byte-length-prefixed elements. ``validation_data``,
  when given, aligns with ``data``: the outputs expected for each entry.
- A ``.jsonl`` file: prompts, one per line (engine/triton/input_jsonl.py), for a text model.
- A folder: a file named after each input holds its raw little-endian bytes (for BYTES, a text
  file with one element per line), as in perf_analyzer's folder mode (one entry). Beyond it: a
  folder named after an input holds one file per entry (for BYTES, one file per element, e.g.
  JPEG photos), cycled over requests. Files named after outputs are their expected values.

An entry is one batch element (the model's shape without its batch dimension; for
``max_batch_size`` 0, the whole tensor), as perf_analyzer's; engine/triton/request_set.py makes
requests of them. Shapes: the entry's ``shape``, else load.input_shapes, else the model's; a
single variable dimension left is taken from the element count. Anything wrong is one line
naming the entry and the input (UserError), before any load is sent. Pure apart from reading
the path: no server, no clock.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from engine.errors import UserError
from engine.triton.input_decode import decode_document
from engine.triton.input_folder import read_folder
from engine.triton.input_json import document_lists, parse_document
from engine.triton.input_jsonl import prompt_entries, read_jsonl
from engine.triton.input_tensors import MAX_DATA_BYTES, DataModel, InputData, file_kind, read_file
from engine.triton.target import TargetInfo

EARLY_PARSE_BYTES = 64 << 20  # read twice (before the server and after) only where that is cheap


def check_readable(path: str) -> None:
    """What can be checked without the model: the path is there, readable, not over the limit."""
    where = Path(path).expanduser()
    try:
        mode = where.stat().st_mode
    except FileNotFoundError:
        raise UserError(f"input data {path}: no such file or folder") from None
    except OSError as exc:
        raise UserError(f"input data {path}: cannot read it: {exc.strerror or exc}") from None
    kind = file_kind(mode)
    if kind is not None:  # a named pipe would block at open, /dev/zero would be read for ever
        raise UserError(f"input data {path}: {kind}, not a regular file or a folder")
    if stat.S_ISDIR(mode):
        if not os.access(where, os.R_OK | os.X_OK):
            raise UserError(f"input data {path}: cannot read the folder")
        return
    try:
        size = where.stat().st_size
        fd = os.open(where, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        os.close(fd)
    except OSError as exc:
        raise UserError(f"input data {path}: cannot read it: {exc.strerror or exc}") from None
    if size > MAX_DATA_BYTES:
        raise UserError(f"input data {path}: {size} bytes, over the {MAX_DATA_BYTES >> 30} GiB limit")


def check_without_the_model(path: str) -> None:
    """What can be checked before the server is up (it may take a minute to load its models on
    the GPUs): ``check_readable``, then a file of up to EARLY_PARSE_BYTES is read as JSON Lines
    prompts or as the JSON document, in the words its full read would use. Its values are
    checked against the model's metadata once the server answers."""
    check_readable(path)
    where = Path(path).expanduser()
    if where.is_dir() or where.stat().st_size > EARLY_PARSE_BYTES:
        return
    label = f"input data {path}"
    raw = read_file(where, label)
    if where.suffix == ".jsonl":
        prompt_entries(raw, "", label)
    else:
        document_lists(decode_document(raw, label), label)


def read_input_data(path: str, info: TargetInfo, input_shapes: dict[str, list[int]] | None = None,
                    stopped: Callable[[], bool] = lambda: False) -> InputData:
    """The entries of the JSON file or folder at ``path`` for the model ``info`` describes.
    ``stopped``: asked while a JSON file is decoded; when it says so, input_decode.Stopped."""
    where = Path(path).expanduser()
    if not where.exists():
        raise UserError(f"input data {path}: no such file or folder")
    model = DataModel(info, input_shapes or {})
    if where.is_dir():
        return read_folder(where.resolve(), model)
    if where.suffix == ".jsonl":
        return read_jsonl(where, path, model, [])
    raw = read_file(where, f"input data {path}")
    digest = hashlib.sha256(raw).hexdigest()
    doc = decode_document(raw, f"input data {path}", stopped)
    del raw  # the text is not kept past its arrays
    notes: list[str] = []
    streams: list[int] = []
    entries = parse_document(doc, model, f"input data {path}", notes, streams)
    return InputData(str(where.resolve()), "json", digest, entries, tuple(notes), tuple(streams))
