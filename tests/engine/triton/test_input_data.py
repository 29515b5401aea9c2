"""load.input_data read as perf_analyzer reads --input-data (pure: files in tmp_path, no server):
each format into raw entries, the requests they make at a batch size, and every kind of bad data
as one line naming the input."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from engine.errors import UserError
from engine.triton.input_data import check_readable, read_input_data
from engine.triton.request_set import (
    MAX_PREPARED_BYTES,
    check_prepared_size,
    data_requests,
    prepared_bytes,
    request_count,
)
from engine.triton.shm import check_region_size, region_bytes
from engine.triton.target import Target, TargetInfo

TARGET = Target("http://127.0.0.1:9", "m")


def _info(inputs, outputs=(), max_batch=8, config=None) -> TargetInfo:
    return TargetInfo(model_config=config or {}, inputs=list(inputs), outputs=list(outputs), max_batch_size=max_batch)


IDENTITY = _info([{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]}],
                 [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 4]}])
MIXED = _info(
    [{"name": "ids", "datatype": "INT64", "shape": [-1, -1]},
     {"name": "image", "datatype": "BYTES", "shape": [-1, 1]},
     {"name": "mask", "datatype": "BOOL", "shape": [-1, 2]}],
    [{"name": "score", "datatype": "FP16", "shape": [-1, 2]}, {"name": "label", "datatype": "BYTES", "shape": [-1, 1]}],
    config={"input": [{"name": "mask", "optional": True}]},
)


def _write(tmp_path: Path, doc, name="data.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def _elements(*values: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(v)) + v for v in values)


def test_flat_lists_content_and_shape_b64_and_strings(tmp_path):
    ids_b64 = base64.b64encode(np.arange(6, dtype="<i8").tobytes()).decode()
    doc = {"data": [
        {"ids": [1, 2, 3], "image": ["\xffjpeg"], "mask": [True, False]},
        {"ids": {"content": [1, 2, 3, 4], "shape": [4]}, "image": {"b64": base64.b64encode(_elements(b"ab")).decode()}},
        {"ids": {"content": {"b64": ids_b64}, "shape": [6]}, "image": {"content": ["x"], "shape": [1]}},
    ]}
    data = read_input_data(_write(tmp_path, doc), MIXED)
    first, second, third = data.entries
    assert first.inputs["ids"].shape == (3,)  # the one variable dimension, from the element count
    assert first.inputs["ids"].raw == np.array([1, 2, 3], "<i8").tobytes()
    assert first.inputs["image"].raw == _elements("\xffjpeg".encode())
    assert first.inputs["mask"].raw == b"\x01\x00"
    assert second.inputs["ids"].shape == (4,) and "mask" not in second.inputs  # optional, left out
    assert second.inputs["image"].raw == _elements(b"ab")
    assert third.inputs["ids"].shape == (6,) and third.inputs["ids"].raw == np.arange(6, dtype="<i8").tobytes()
    assert data.kind == "json" and not data.validated
    assert data.sha256 == hashlib.sha256(Path(data.path).read_bytes()).hexdigest()


def test_one_variable_dimension_is_taken_from_the_element_count(tmp_path):
    info = _info([{"name": "t", "datatype": "INT32", "shape": [-1, -1, -1]}])
    data = read_input_data(_write(tmp_path, {"data": [{"t": list(range(6))}]}), info, {"t": [2, 3]})
    assert data.entries[0].inputs["t"].shape == (2, 3)
    with pytest.raises(UserError, match="variable dimensions"):
        read_input_data(_write(tmp_path, {"data": [{"t": list(range(6))}]}), info)
    data = read_input_data(_write(tmp_path, {"data": [{"t": {"content": list(range(6)), "shape": [2, 3]}}]}), info)
    assert data.entries[0].inputs["t"].shape == (2, 3)
    one = _info([{"name": "t", "datatype": "INT32", "shape": [-1, 2, -1]}])
    assert read_input_data(_write(tmp_path, {"data": [{"t": list(range(6))}]}), one).entries[0].inputs["t"].shape == (2, 3)


def test_validation_data_and_the_batches_perf_analyzer_makes(tmp_path):
    doc = {"data": [{"INPUT0": [float(k)] * 4} for k in range(3)],
           "validation_data": [{"OUTPUT0": [float(k)] * 4} for k in range(3)]}
    data = read_input_data(_write(tmp_path, doc), IDENTITY)
    assert data.validated and len(data.entries) == 3
    requests = data_requests(TARGET, IDENTITY, 2, data)
    # perf_analyzer: request k carries entries 2k, 2k+1 (mod 3); it repeats after 3 requests
    assert [r.label for r in requests] == ["entries 0, 1", "entries 2, 0", "entries 1, 2"]
    assert requests[1].shapes == {"INPUT0": [2, 4]}
    assert requests[1].tensors[0][1] == np.array([2.0] * 4 + [0.0] * 4, "<f4").tobytes()
    assert requests[1].expected["OUTPUT0"].raw == requests[1].tensors[0][1]
    assert request_count(4, 2) == 2 and request_count(3, 1) == 3 and request_count(5, 4) == 5


def test_a_folder_of_raw_files_is_perf_analyzers_folder_mode(tmp_path):
    (tmp_path / "INPUT0").write_bytes(np.arange(4, dtype="<f4").tobytes())
    (tmp_path / "OUTPUT0").write_bytes(np.arange(4, dtype="<f4").tobytes())
    data = read_input_data(str(tmp_path), IDENTITY)
    assert data.kind == "folder" and len(data.entries) == 1 and data.validated
    assert data.entries[0].inputs["INPUT0"].raw == np.arange(4, dtype="<f4").tobytes()


def test_a_folder_of_bytes_files_is_cycled_one_element_per_entry(tmp_path):
    info = _info([{"name": "image", "datatype": "BYTES", "shape": [-1, 1]}, {"name": "n", "datatype": "INT32", "shape": [-1, 1]}])
    photos = tmp_path / "image"
    photos.mkdir()
    for k in range(3):
        (photos / f"{k}.jpg").write_bytes(b"\xff\xd8\xff" + bytes([k]))
    (tmp_path / "n").write_bytes(struct.pack("<i", 7))
    data = read_input_data(str(tmp_path), info)
    assert len(data.entries) == 3
    assert [e.inputs["image"].raw for e in data.entries] == [_elements(b"\xff\xd8\xff" + bytes([k])) for k in range(3)]
    assert all(e.inputs["n"].raw == struct.pack("<i", 7) for e in data.entries)
    before = data.sha256
    (photos / "2.jpg").write_bytes(b"other")
    assert read_input_data(str(tmp_path), info).sha256 != before  # the digest covers every file


def test_the_requests_size_is_computed_and_refused_without_allocating():
    gib = 1 << 30
    assert prepared_bytes([gib // 2] * 3, 1) == 3 * gib // 2
    assert prepared_bytes([10, 20, 30], 2) == 2 * 60  # lcm(3, 2) = 6 entries: each twice
    check_prepared_size(prepared_bytes([gib // 4] * 8, 1), "x")
    with pytest.raises(UserError, match="over the limit of 2 GiB"):
        check_prepared_size(prepared_bytes([gib // 4] * 9, 1), "x")
    assert MAX_PREPARED_BYTES == 2 * gib
    assert region_bytes([[("a", 100), ("b", 1)], [("a", 64)]]) == 128 + 64 + 64
    with pytest.raises(UserError, match="shared memory: the 3 requests' inputs need 2.2 GiB"):
        check_region_size([[("a", 3 * gib // 4)]] * 3)


BAD = [
    ("not json {", "not JSON"),
    ({"nodata": []}, "expected a JSON object with a 'data' list"),
    ({"data": []}, "'data' is empty"),
    ({"data": [{"INPUT0": [1.0] * 4}], "validation_data": []}, "must align with 'data'"),
    ({"data": [{}]}, "entry 0 lacks input 'INPUT0'"),
    ({"data": [{"INPUT0": [1.0] * 3}]}, "input 'INPUT0': 3 elements where shape \\[4\\] holds 4"),
    ({"data": [{"INPUT0": {"content": [1.0] * 4, "shape": [2, 2]}}]}, "shape \\[2, 2\\] does not fit the model's \\[4\\]"),
    ({"data": [{"INPUT0": ["a", "b", "c", "d"]}]}, "input 'INPUT0': FP32 values must be numbers"),
    ({"data": [{"INPUT0": {"b64": "!!not base64!!"}}]}, "input 'INPUT0': bad base64"),
    ({"data": [{"INPUT0": {"b64": "AAA="}}]}, "2 bytes are not a whole number of FP32 elements"),
    ({"data": [{"INPUT0": {"shape": [4]}}]}, "expected 'content' or 'b64'"),
    ({"data": [{"INPUT0": "1,2,3,4"}]}, "expected a list of values"),
    ({"data": [[{"INPUT0": [1.0] * 4}]]}, "sequence streams"),
    ({"data": [{"INPUT0": [1.0] * 4}], "validation_data": [{"OUTPUT0": [1.0] * 5}]}, "output 'OUTPUT0': 5 elements"),
]


@pytest.mark.parametrize(("doc", "needle"), BAD, ids=[n for _d, n in BAD])
def test_bad_data_is_one_line_naming_what_is_wrong(tmp_path, doc, needle):
    with pytest.raises(UserError, match=needle) as info:
        read_input_data(_write(tmp_path, doc), IDENTITY)
    assert "\n" not in str(info.value) and str(info.value).startswith("input data ")


INTS = _info([{"name": "ids", "datatype": "UINT8", "shape": [-1, 2]}])


@pytest.mark.parametrize(("values", "needle"), [
    ([1, 300], "value 300 does not fit UINT8"),
    ([1, 2.5], "UINT8 values must be integers, found 2.5"),
    ([1, True], "UINT8 values must be integers, found true"),
    ([-1, 2**70], "value 1180591620717411303424 does not fit UINT8"),
])
def test_values_the_datatype_cannot_hold(tmp_path, values, needle):
    with pytest.raises(UserError, match=needle):
        read_input_data(_write(tmp_path, {"data": [{"ids": values}]}), INTS)


def test_bad_folders_and_files(tmp_path):
    with pytest.raises(UserError, match="no such file or folder"):
        read_input_data(str(tmp_path / "nope.json"), IDENTITY)
    with pytest.raises(UserError, match="no such file or folder"):
        check_readable(str(tmp_path / "nope.json"))
    folder = tmp_path / "f"
    folder.mkdir()
    with pytest.raises(UserError, match="no file or folder named after input 'INPUT0'"):
        read_input_data(str(folder), IDENTITY)
    (folder / "INPUT0").write_bytes(b"\0" * 15)
    with pytest.raises(UserError, match="15 bytes are not a whole number of FP32 elements"):
        read_input_data(str(folder), IDENTITY)
    (folder / "INPUT0").write_bytes(b"\0" * 16)
    assert len(read_input_data(str(folder), IDENTITY).entries) == 1
    (folder / "README").write_text("x")  # not the model's: not read, as perf_analyzer leaves it
    (note,) = read_input_data(str(folder), IDENTITY).notes
    assert "'README' named after no input or output of the model" in note and "not read" in note
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe{")
    with pytest.raises(UserError, match="not JSON"):
        read_input_data(str(tmp_path / "bin.json"), IDENTITY)


def test_a_huge_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from engine.triton import input_data, input_tensors

    path = _write(tmp_path, {"data": [{"INPUT0": [1.0] * 4}]})
    monkeypatch.setattr(input_data, "MAX_DATA_BYTES", 10)
    monkeypatch.setattr(input_tensors, "MAX_DATA_BYTES", 10)
    with pytest.raises(UserError, match="over the 0 GiB limit|over the"):
        check_readable(path)
    with pytest.raises(UserError, match="over the"):
        read_input_data(path, IDENTITY)


def test_entries_of_different_shapes_cannot_share_a_batch(tmp_path):
    info = _info([{"name": "t", "datatype": "INT32", "shape": [-1, -1]}])
    data = read_input_data(_write(tmp_path, {"data": [{"t": [1, 2]}, {"t": [1, 2, 3]}]}), info)
    assert len(data_requests(TARGET, info, 1, data)) == 2
    with pytest.raises(UserError, match="cannot batch entries 0 and 1: input 't' has shapes \\[2\\] and \\[3\\]"):
        data_requests(TARGET, info, 2, data)


def test_a_bytes_text_file_is_one_element_per_line_as_in_perf_analyzer(tmp_path):
    info = _info([{"name": "text", "datatype": "BYTES", "shape": [-1, 2]}])
    (tmp_path / "text").write_text("first line\nsecond\n")
    data = read_input_data(str(tmp_path), info)
    assert data.entries[0].inputs["text"].raw == _elements(b"first line", b"second")
