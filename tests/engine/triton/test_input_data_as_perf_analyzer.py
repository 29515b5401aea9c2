"""One input-data file, one reading: where perf_analyzer 2.41 reads a file in a particular way,
our reader reads it the same (pure: the datacheck models' metadata written out by hand, no
server). FP16 from base64 (perf_analyzer takes FP16 only so), a BYTES base64 as the whole
serialized tensor (each element a 4-byte little-endian length, then its bytes), validation data
and inputs naming tensors the model lacks ignored (one file for an ensemble and the models it
wraps; perf_analyzer 2.41 runs such a file without a word)."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from engine.errors import UserError
from engine.triton.input_data import read_input_data
from engine.triton.request_set import data_requests
from engine.triton.target import Target, TargetInfo

DATA_FILE = Path(__file__).resolve().parents[2] / "data" / "datacheck_input.json"
INPUTS = [{"name": "TOKENS", "datatype": "INT64", "shape": [-1, -1]},
          {"name": "IMAGE", "datatype": "BYTES", "shape": [-1, 1]},
          {"name": "SCALE", "datatype": "FP16", "shape": [-1, 1]}]
CONFIG = {"input": [{"name": "SCALE", "optional": True}]}
DATACHECK = TargetInfo(model_config=CONFIG, inputs=INPUTS, max_batch_size=8, outputs=[
    {"name": "TOKEN_COUNT", "datatype": "INT64", "shape": [-1, 1]},
    {"name": "IMAGE_BYTES", "datatype": "INT64", "shape": [-1, 1]},
    {"name": "SCORE", "datatype": "FP32", "shape": [-1, 1]}])
BLS = TargetInfo(model_config=CONFIG, inputs=INPUTS, max_batch_size=8, outputs=[
    {"name": "TOKEN_COUNT", "datatype": "INT64", "shape": [-1, 1]},
    {"name": "SCORE", "datatype": "FP32", "shape": [-1, 1]}])


def _write(tmp_path: Path, doc: dict) -> str:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_bytes_b64_is_the_whole_serialized_tensor_not_one_element():
    document = json.loads(DATA_FILE.read_text())
    data = read_input_data(str(DATA_FILE), DATACHECK)
    for entry, read in zip(document["data"], data.entries, strict=True):
        raw = base64.b64decode(entry["IMAGE"]["b64"])
        # sent as it is in the file: the 4-byte length is the file's, then the JPEG
        assert read.inputs["IMAGE"].raw == raw and read.inputs["IMAGE"].shape == (1,)
        assert struct.unpack("<I", raw[:4])[0] == len(raw) - 4 and raw[4:7] == b"\xff\xd8\xff"


def test_a_bare_jpeg_in_b64_is_refused_where_perf_analyzer_would_send_garbage(tmp_path):
    jpeg = b"\xff\xd8\xff\xe0" + b"\0" * 60
    doc = {"data": [{"TOKENS": [101, 102], "IMAGE": {"b64": base64.b64encode(jpeg).decode()}}]}
    with pytest.raises(UserError, match="input 'IMAGE': BYTES data must be elements each after a 4-byte"):
        read_input_data(_write(tmp_path, doc), DATACHECK)


def test_fp16_from_b64_as_perf_analyzer_and_from_a_list_beyond_it(tmp_path):
    half = np.array([0.5], "<f2").tobytes()
    as_b64 = {"TOKENS": [101], "IMAGE": ["x"], "SCALE": {"b64": base64.b64encode(half).decode()}}
    as_list = {"TOKENS": [101], "IMAGE": ["x"], "SCALE": [0.5]}
    data = read_input_data(_write(tmp_path, {"data": [as_b64, as_list]}), DATACHECK)
    assert data.entries[0].inputs["SCALE"].raw == data.entries[1].inputs["SCALE"].raw == half


def test_validation_data_for_outputs_the_model_lacks_is_ignored_with_a_note():
    """The datacheck file names IMAGE_BYTES, which the BLS model does not output: perf_analyzer
    ignores it, and so do we (the other outputs are still compared), saying so once."""
    data = read_input_data(str(DATA_FILE), BLS)
    assert [sorted(e.expected) for e in data.entries] == [["SCORE", "TOKEN_COUNT"]] * 3
    (note,) = data.notes
    assert "validation_data names 'IMAGE_BYTES', which the model does not output" in note
    requests = data_requests(Target("http://127.0.0.1:9", "datacheck_bls", input_shapes={}), BLS, 1, data)
    assert set(requests[0].expected) == {"TOKEN_COUNT", "SCORE"}
    assert read_input_data(str(DATA_FILE), DATACHECK).notes == ()


def test_an_input_the_model_lacks_is_not_sent_with_a_note(tmp_path):
    doc = {"data": [{"TOKENS": [101], "IMAGE": ["x"], "PROMPT": ["unused"]}]}
    data = read_input_data(_write(tmp_path, doc), DATACHECK)
    assert list(data.entries[0].inputs) == ["TOKENS", "IMAGE"]
    (note,) = data.notes
    assert "data names 'PROMPT', which the model does not take (inputs: IMAGE, SCALE, TOKENS): not sent" in note


def test_validation_data_may_name_some_outputs_where_perf_analyzer_wants_all(tmp_path):
    """Looser than perf_analyzer (which fails on a missing output): only those named are compared."""
    doc = {"data": [{"TOKENS": [101], "IMAGE": ["x"]}], "validation_data": [{"SCORE": [0.101]}]}
    data = read_input_data(_write(tmp_path, doc), DATACHECK)
    assert list(data.entries[0].expected) == ["SCORE"] and data.notes == ()
