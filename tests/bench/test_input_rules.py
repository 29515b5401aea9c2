"""`python -m bench input_rules`: each file we run and perf_analyzer 2.41 refuses makes the very
requests of the file its rule says it stands for (pure: the mixed model's metadata written out by
hand, no server), and, with perf_analyzer set up, the whole stage against the embedded server."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from bench.http_capture import NotReadable, infer_requests
from bench.input_rules import (
    CASES,
    Case,
    check_all,
    pa_on_file,
    request_bytes,
    table,
    write_case,
)
from bench.tools import PA_DIR, SetupError, ensure_perf_analyzer
from engine.triton.input_json import PA_REFUSES
from engine.triton.target import Target, TargetInfo

MIXED = TargetInfo(  # model_repository/embedded/mixed/config.pbtxt, as the server's metadata gives it
    model_config={"input": [{"name": "EXTRA", "optional": True}]}, max_batch_size=8,
    inputs=[{"name": "IDS", "datatype": "INT64", "shape": [-1, -1]},
            {"name": "TEXT", "datatype": "BYTES", "shape": [-1, 1]},
            {"name": "HALF", "datatype": "FP16", "shape": [-1, 4]},
            {"name": "BRAIN", "datatype": "BF16", "shape": [-1, 2, 2]},
            {"name": "PIXELS", "datatype": "UINT8", "shape": [-1, 3]},
            {"name": "EXTRA", "datatype": "FP32", "shape": [-1, 2]}],
    outputs=[{"name": "IDS_OUT", "datatype": "INT64", "shape": [-1, -1]},
             {"name": "TEXT_OUT", "datatype": "BYTES", "shape": [-1, 1]},
             {"name": "HALF_OUT", "datatype": "FP16", "shape": [-1, 4]},
             {"name": "BRAIN_OUT", "datatype": "BF16", "shape": [-1, 2, 2]},
             {"name": "EXTRA_SENT", "datatype": "BOOL", "shape": [-1, 1]}])
TARGET = Target("http://127.0.0.1:9", "mixed", input_shapes={})


def test_every_rule_has_a_case():
    assert {case.rule for case in CASES} == set(PA_REFUSES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.what)
def test_the_original_makes_the_equivalents_requests_byte_for_byte(case: Case, tmp_path: Path):
    original, equivalent = write_case(case, tmp_path, 0)
    ours, notes = request_bytes(original, TARGET, MIXED)
    theirs, equivalent_notes = request_bytes(equivalent, TARGET, MIXED)
    assert ours == theirs and len(ours) == len(case.original["data"])
    (note,) = notes  # the original runs under its rule, and says so
    assert PA_REFUSES[case.rule] in note
    assert equivalent_notes == ()  # the equivalent is a file perf_analyzer takes as it is


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.what)
def test_an_equivalent_one_value_off_is_told_apart(case: Case, tmp_path: Path):
    """The comparison sees the values: one PIXELS value changed in the equivalent changes its bytes."""
    changed = copy.deepcopy(case.equivalent_data)
    changed[-1]["PIXELS"][0] += 1
    original, equivalent = write_case(Case(case.rule, case.what, case.original_data, changed), tmp_path, 0)
    assert request_bytes(original, TARGET, MIXED)[0] != request_bytes(equivalent, TARGET, MIXED)[0]


def test_our_requests_read_back_as_their_tensors(tmp_path: Path):
    (case,) = [c for c in CASES if c.rule == "inferred_shape"]
    original, _ = write_case(case, tmp_path, 0)
    requests, _ = request_bytes(original, TARGET, MIXED)
    read = [infer_requests(raw) for raw in requests]
    assert [len(r) for r in read] == [1, 1]
    ids = [dict((name, (shape, raw)) for name, _dt, shape, raw in r[0])["IDS"] for r in read]
    assert ids == [((1, 2), np.array([101, 7], "<i8").tobytes()), ((1, 3), np.array([101, 7, 8], "<i8").tobytes())]


def test_a_request_in_perf_analyzers_framing_reads_as_ours_does():
    """perf_analyzer puts the inputs in another order and adds outputs: the tensors are the same."""
    header = json.dumps({"inputs": [{"name": "B", "shape": [1, 1], "datatype": "BYTES",
                                     "parameters": {"binary_data_size": 5}},
                                    {"name": "A", "shape": [1, 2], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 8}}],
                         "outputs": [{"name": "C", "parameters": {"binary_data": True}}]}).encode()
    body = header + b"\x01\0\0\0x" + np.array([1.0, 2.0], "<f4").tobytes()
    head = (f"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: {len(header)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    meta = b"GET /v2/models/m HTTP/1.1\r\nHost: x\r\n\r\n"
    (request,) = infer_requests(meta + head + body)
    assert request == (("A", "FP32", (1, 2), np.array([1.0, 2.0], "<f4").tobytes()), ("B", "BYTES", (1, 1), b"\x01\0\0\0x"))
    with pytest.raises(NotReadable, match="cut short"):
        infer_requests(head + body[:-1])


def test_the_equivalent_writes_floats_as_floats(tmp_path: Path):
    (case,) = [c for c in CASES if c.rule == "int_literals"]
    original, equivalent = write_case(case, tmp_path, 0)
    assert '"EXTRA": [1, 2]' in original.read_text() and '"EXTRA": [1.0, 2.0]' in equivalent.read_text()
    assert json.loads(original.read_text()) == json.loads(equivalent.read_text())  # equal as numbers


@pytest.fixture(scope="session")  # session, as the server's: asked first, a skip starts no server
def perf_analyzer() -> tuple[Path, dict[str, str]]:
    if not (PA_DIR / "perf_analyzer").exists():
        pytest.skip(f"perf_analyzer 2.41 is not set up in {PA_DIR} (python -m bench input_rules sets it up: a download)")
    try:
        return ensure_perf_analyzer()
    except SetupError as exc:
        pytest.skip(f"perf_analyzer does not run here: {exc}")


@pytest.mark.server
@pytest.mark.slow
def test_the_stage_against_perf_analyzer(perf_analyzer, shapes_server, tmp_path: Path):
    rows = check_all(shapes_server.http_url, perf_analyzer, tmp_path)
    text = table(rows)
    for row in rows:
        assert row.refused and row.taken and row.ours_ok and row.same_requests, text
    assert [row.case for row in rows] == list(CASES)


@pytest.mark.server
@pytest.mark.slow
def test_perf_analyzers_requests_read_off_the_wire_tell_one_value_apart(perf_analyzer, shapes_server, tmp_path: Path):
    """The wire comparison is not blind: perf_analyzer sent one PIXELS value more, and it shows."""
    (case,) = [c for c in CASES if c.rule == "int_literals"]
    changed = copy.deepcopy(case.equivalent_data)
    changed[0]["PIXELS"][0] += 1
    original, equivalent = write_case(Case(case.rule, case.what, case.original_data, changed), tmp_path, 0)
    ok, said, sent = pa_on_file(perf_analyzer, shapes_server.http_url, equivalent, capture=True)
    assert ok, said
    ours = {request for raw in request_bytes(original, TARGET, MIXED)[0] for request in infer_requests(raw)}
    (theirs,) = sent
    (mine,) = ours
    assert theirs != mine and [t for t in theirs if t[0] != "PIXELS"] == [t for t in mine if t[0] != "PIXELS"]


@pytest.mark.server
@pytest.mark.slow
def test_validation_of_a_variable_output_perf_analyzer_refuses_and_we_compare(perf_analyzer, shapes_server,
                                                                               tmp_path: Path):
    """docs/input_data.md's row: perf_analyzer 2.41 refuses validation_data for an output with a
    variable dimension even with its shape; ours compares it, and a wrong value fails the level."""
    import asyncio

    from bench.input_rules import BRAIN, HALF
    from engine.load.sweep import run_sweep
    from engine.profiles import Load
    from engine.triton.api import TritonApi
    from engine.triton.target import describe_target

    (case,) = [c for c in CASES if c.rule == "inferred_shape"]
    document = dict(case.equivalent, validation_data=[
        {"IDS_OUT": {"content": ids, "shape": [len(ids)]}, "TEXT_OUT": ["a prompt"], "HALF_OUT": HALF,
         "BRAIN_OUT": BRAIN, "EXTRA_SENT": [True]} for ids in ([101, 7], [101, 7, 8])])
    good = tmp_path / "good.json"
    good.write_text(json.dumps(document))
    ok, said, _ = pa_on_file(perf_analyzer, shapes_server.http_url, good)
    assert not ok and 'tensor "IDS_OUT" with model shape [-1] needs to have its shape fully defined' in said, said
    document["validation_data"][1]["IDS_OUT"]["content"][2] = 9
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(document))
    target = Target(shapes_server.http_url, "mixed")
    info = asyncio.run(describe_target(target))
    errors = {}
    for path in (good, wrong):
        load = Load(concurrency=[1], input_data=str(path), window_ms=500, stability_percent=90, warmup_s=0.5,
                    max_windows=3)
        (result,) = asyncio.run(run_sweep(TritonApi(target, info), load, lambda e: None, asyncio.Event()))
        errors[path.stem] = result.errors
    assert errors["good"] == 0 and errors["wrong"] > 0, errors
