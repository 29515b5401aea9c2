"""Input data as files and text: only regular files are read, with a bounded read; long lists of
numbers are decoded straight into arrays by the same rules as short ones; text that is not text
(a lone surrogate) and what perf_analyzer 2.41 refuses are named, entry and input."""

from __future__ import annotations

import json
import os
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

from engine.errors import UserError
from engine.triton.input_data import check_readable, read_input_data
from engine.triton.input_decode import MIN_TEXT, Numbers, Stopped, decode_document
from engine.triton.input_json import parse_document
from engine.triton.input_tensors import DataModel
from engine.triton.target import TargetInfo


def _info(inputs, outputs=(), max_batch=8) -> TargetInfo:
    """Every input optional: an entry names the ones a test is about."""
    config = {"input": [{"name": t["name"], "optional": True} for t in inputs]}
    return TargetInfo(model_config=config, inputs=list(inputs), outputs=list(outputs), max_batch_size=max_batch)


def _write(tmp_path: Path, doc, name: str = "data.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


TYPED = _info([{"name": name, "datatype": datatype, "shape": [-1, -1]}
               for name, datatype in (("f32", "FP32"), ("f64", "FP64"), ("f16", "FP16"), ("bf16", "BF16"),
                                      ("i64", "INT64"), ("u8", "UINT8"), ("b", "BOOL"))])
TEXT = _info([{"name": "text", "datatype": "BYTES", "shape": [-1, -1]}])


# --------------------------------------------------------------------------- special files


def test_a_named_pipe_is_refused_without_opening_it(tmp_path):
    """A FIFO with no writer blocks for ever at open(): it is refused from its stat alone."""
    fifo = tmp_path / "data.json"
    os.mkfifo(fifo)
    for call in (lambda: check_readable(str(fifo)), lambda: read_input_data(str(fifo), TEXT)):
        done: list[str] = []
        worker = threading.Thread(target=lambda c=call, d=done: d.append(_refusal(c)), daemon=True)
        worker.start()
        worker.join(60)  # a hang guard only: the refusal needs no clock
        assert done and "a named pipe, not a regular file" in done[0], done


def test_a_link_to_a_device_is_refused(tmp_path):
    """/dev/zero says 0 bytes and never ends: a link to it passed the size check and was read
    until the kernel killed the tool."""
    link = tmp_path / "data.json"
    link.symlink_to("/dev/zero")
    assert "a character device, not a regular file" in _refusal(lambda: check_readable(str(link)))
    assert "a character device, not a regular file" in _refusal(lambda: read_input_data(str(link), TEXT))
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "text").symlink_to("/dev/zero")  # folder mode: a file named after the input
    assert "neither a file nor a folder" in _refusal(lambda: read_input_data(str(folder), TEXT))


def test_the_read_stops_past_the_limit_whatever_the_size_said(tmp_path, monkeypatch):
    from engine.triton import input_tensors

    path = Path(_write(tmp_path, {"data": [{"text": ["x" * 100]}]}))
    monkeypatch.setattr(input_tensors, "MAX_DATA_BYTES", 50)
    monkeypatch.setattr(os, "fstat", lambda fd: os.stat_result((0o100644, 0, 0, 1, 0, 0, 0, 0, 0, 0)))  # says 0 bytes
    assert "holds over" in _refusal(lambda: input_tensors.read_file(path, "input data"))


def _refusal(call) -> str:
    with pytest.raises(UserError) as info:
        call()
    text = str(info.value)
    assert "\n" not in text
    return text


# --------------------------------------------------------------------------- text that is not text


def test_a_lone_surrogate_is_bad_input_naming_the_entry_and_the_input(tmp_path):
    """"\\ud800" is valid JSON and no UTF-8: it ended a run as a failed one (UnicodeEncodeError)."""
    path = _write(tmp_path, '{"data": [{"text": ["ok"]}, {"text": ["fine", "\\ud800"]}]}')
    said = _refusal(lambda: read_input_data(path, TEXT))
    assert "data entry 1, input 'text': BYTES value 1 is not valid Unicode text" in said, said


# --------------------------------------------------------------------------- long lists as arrays


def _values(n: int, kind: str) -> list:
    rng = np.random.default_rng(7)
    if kind == "float":
        return [float(v) for v in rng.standard_normal(n)]
    if kind == "small float":
        return [float(v) for v in rng.random(n) * 1e-5]  # json writes some as 1e-06: exponent, no point
    if kind == "bool":
        return [int(v) for v in rng.integers(0, 2, n)]
    return [int(v) for v in rng.integers(0, 200, n)]


@pytest.mark.parametrize(("name", "kind"), [("f32", "float"), ("f64", "float"), ("f16", "small float"),
                                            ("bf16", "float"), ("i64", "int"), ("u8", "int"), ("b", "bool")])
def test_a_long_list_is_decoded_to_the_same_bytes_as_a_short_one(tmp_path, name, kind):
    """The array path (lists longer than MIN_TEXT characters) and the list path agree exactly."""
    values = _values(3000, kind)
    assert len(json.dumps(values)) > MIN_TEXT
    long = read_input_data(_write(tmp_path, {"data": [{name: values}]}, "long.json"), TYPED)
    pieces = [values[k:k + 20] for k in range(0, len(values), 20)]  # each under MIN_TEXT: Python lists
    short = [read_input_data(_write(tmp_path, {"data": [{name: p}]}, "short.json"), TYPED).entries[0].inputs[name].raw
             for p in pieces]
    assert long.entries[0].inputs[name].raw == b"".join(short)
    assert long.entries[0].inputs[name].shape == (3000,)


@pytest.mark.parametrize(("name", "values", "needle"), [
    ("i64", [1.5] * 100, "INT64 values must be integers, found 1.5"),
    ("u8", [7] * 100 + [300], "value 300 does not fit UINT8"),
    ("u8", [-1] + [7] * 100, "value -1 does not fit UINT8"),
    ("b", [2] * 200, "BOOL values must be true/false"),
    ("i64", [2**70] * 20, "value 1180591620717411303424 does not fit INT64"),
])
def test_a_long_list_is_refused_as_a_short_one(tmp_path, name, values, needle):
    assert needle in _refusal(lambda: read_input_data(_write(tmp_path, {"data": [{name: values}]}), TYPED))


def test_uint64s_past_int64_are_read_exactly(tmp_path):
    info = _info([{"name": "u", "datatype": "UINT64", "shape": [-1, -1]}])
    values = [2**64 - 1, 2**63, 5] * 20
    data = read_input_data(_write(tmp_path, {"data": [{"u": values}]}), info)
    assert data.entries[0].inputs["u"].raw == struct.pack(f"<{len(values)}Q", *values)


def test_only_json_numbers_become_arrays():
    """What float() takes and JSON does not is left to the JSON decoder, which refuses it; a list
    inside a string stays the string."""
    for bad in (b"+1", b"1.", b".5", b"1 2"):
        text = b'{"a": [' + b",".join([b"1"] * 200 + [bad]) + b"]}"
        with pytest.raises(UserError, match="not JSON"):
            decode_document(text, "x")
    inside = '[' + ",".join(["1"] * 300) + ']'
    doc = decode_document(json.dumps({"s": [inside, 'a "quoted" \\ ' + inside], "n": [1.0] * 300}).encode(), "x")
    assert doc["s"] == [inside, 'a "quoted" \\ ' + inside]
    assert isinstance(doc["n"], Numbers) and [v for part in doc["n"].pieces() for v in part.tolist()] == [1.0] * 300
    text = b'{"data": [{"f32": [' + b",".join([b"1.5"] * 200 + [b"1e"]) + b"]}]}"  # JSON's grammar, float()'s refusal
    doc = decode_document(text, "x")  # the text is JSON's shape of a list: read once its datatype is known
    assert "input 'f32': not a list of JSON numbers: found '1e'" in _refusal(
        lambda: parse_document(doc, DataModel(TYPED, {}), "x"))


def test_a_decode_stops_when_asked(tmp_path):
    path = _write(tmp_path, {"data": [{"f32": [0.5] * 300_000}]})
    with pytest.raises(Stopped):
        read_input_data(path, TYPED, stopped=lambda: True)


# --------------------------------------------------------------------------- what perf_analyzer refuses


def test_what_perf_analyzer_refuses_runs_under_a_stated_rule_and_says_so(tmp_path):
    """perf_analyzer 2.41 says 'unable to find float data in json' for integer literals in a
    float input and for nested lists, and needs one --shape for every entry: each is sent under
    the rule docs/input_data.md states, and a note (a warning in the run) says so."""
    doc = {"data": [{"f32": [1, 2.5]}, {"f32": [[1.0, 2.0], [3.0, 4.0]]}, {"i64": [1, 2, 3]},
                    {"f64": [0.5] * 300 + [1]}]}
    data = read_input_data(_write(tmp_path, doc), TYPED)
    notes = "\n".join(data.notes)
    assert "data entry 0, 'f32': integer literals for a float input, which perf_analyzer 2.41 refuses" in notes
    assert "data entry 1, 'f32': nested lists, which perf_analyzer 2.41 refuses" in notes
    assert "entries of different shapes with no 'shape'" in notes and "entry 0 has shape [2], this one [4]" in notes
    assert data.entries[0].inputs["f32"].raw == struct.pack("<2f", 1.0, 2.5)  # the values, as the rule says
    assert data.entries[3].inputs["f64"].raw == struct.pack("<301d", *([0.5] * 300 + [1.0]))
    clean = {"data": [{"f32": {"content": [1.0, 2.5], "shape": [2]}}, {"f32": {"content": [3.0] * 4, "shape": [4]}}]}
    assert read_input_data(_write(tmp_path, clean, "clean.json"), TYPED).notes == ()
    long_ints = {"data": [{"f32": {"content": [3] * 300, "shape": [300]}}]}  # the array path says so too
    (note,) = read_input_data(_write(tmp_path, long_ints, "ints.json"), TYPED).notes
    assert "integer literals for a float input" in note
