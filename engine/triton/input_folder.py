"""load.input_data as a folder: perf_analyzer's folder mode (a file named after each input holds
its raw little-endian bytes for one entry; for BYTES a text file, one element per line), and a
folder named after an input holding one file per entry (for BYTES, one file per element, e.g.
JPEG photos), cycled over requests. Files named after outputs are their expected values; other
names are not read (a note). The digest covers the files read: relative paths and bytes, in
sorted order."""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

from engine.errors import UserError
from engine.triton.input_tensors import (
    MAX_DATA_BYTES,
    DataEntry,
    DataModel,
    DataTensor,
    InputData,
    element,
    entry_shape,
    read_file,
    whole_elements,
)


def read_folder(folder: Path, model: DataModel) -> InputData:
    """perf_analyzer's folder mode, and a folder per input holding one file per entry (BYTES:
    one file per element)."""
    where = f"input data {folder}"
    listed = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    names = [n for n in listed if n in model.inputs or n in model.outputs]
    others = [n for n in listed if n not in names]  # perf_analyzer reads only the model's names too
    notes = [f"{where}: {', '.join(repr(n) for n in others)} named after no input or output of the model "
             f"(inputs: {model.names(False)}; outputs: {model.names(True)}): not read, as perf_analyzer ignores them"
             ] if others else []
    for name in names:
        if not (folder / name).is_file() and not (folder / name).is_dir():
            raise UserError(f"{where}: {name!r} is neither a file nor a folder")
    files = sorted(p for n in names for p in ([folder / n] if (folder / n).is_file() else _files(folder / n)))
    total = sum(p.stat().st_size for p in files)
    if total > MAX_DATA_BYTES:
        raise UserError(f"{where}: its files hold {total} bytes, over the {MAX_DATA_BYTES >> 30} GiB limit")
    for name in model.required:
        if name not in names:
            raise UserError(f"{where}: no file or folder named after input {name!r}")
    contents = {p: read_file(p, where) for p in files}  # each file read once
    digest = hashlib.sha256()
    for p in files:
        digest.update(str(p.relative_to(folder)).encode() + b"\0" + contents[p])
    inputs = {name: _folder_tensors(folder / name, datatype, dims, model.wanted.get(name), f"{where}: input {name!r}",
                                    contents)
              for name, (datatype, dims) in model.inputs.items() if name in names}
    expected = {name: _folder_tensors(folder / name, datatype, dims, None, f"{where}: output {name!r}", contents)
                for name, (datatype, dims) in model.outputs.items() if name in names}
    count = max(len(items) for items in (*inputs.values(), *expected.values()))
    entries = [DataEntry({n: items[k % len(items)] for n, items in inputs.items()},
                         {n: items[k % len(items)] for n, items in expected.items()}) for k in range(count)]
    return InputData(str(folder), "folder", digest.hexdigest(), entries, tuple(notes))


def _folder_tensors(path: Path, datatype: str, dims: list[int], wanted: list[int] | None, label: str,
                    contents: dict[Path, bytes]) -> list[DataTensor]:
    """The tensors a file (one) or a folder (one per file; BYTES: one element per file) gives."""
    if path.is_file():
        raw = contents[path]
        if datatype == "BYTES":  # perf_analyzer: a text file, one element per line
            lines = raw.decode("utf-8", "surrogateescape").splitlines()
            raw, count = b"".join(element(line.encode("utf-8", "surrogateescape")) for line in lines), len(lines)
        else:
            count = whole_elements(raw, datatype, label)
        return [DataTensor(datatype, tuple(entry_shape(None, dims, wanted, count, label)), raw)]
    files = _files(path)
    if not files:
        raise UserError(f"{label}: the folder {path.name!r} holds no file")
    if datatype != "BYTES":
        out = []
        for p in files:
            raw = contents[p]
            count = whole_elements(raw, datatype, f"{label}, file {p.name!r}")
            out.append(DataTensor(datatype, tuple(entry_shape(None, dims, wanted, count, f"{label}, file {p.name!r}")), raw))
        return out
    shape = wanted if wanted is not None else [1 if d < 0 else d for d in dims]
    per_entry = math.prod(shape)
    if per_entry < 1:
        raise UserError(f"{label}: shape {shape} holds no element")
    elements = [element(contents[p]) for p in files]
    entries = math.ceil(len(elements) / per_entry)
    return [DataTensor(datatype, tuple(shape), b"".join(elements[(k * per_entry + j) % len(elements)]
                                                         for j in range(per_entry))) for k in range(entries)]


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
