"""Malformed answers are errors, every one of them: a hostile server (tests/reliability/
hostile_server.py) answers each inference with something that is not what was asked, and the run
counts each answer as ``malformed_answer``, names what was wrong, fails the level and exits
non-zero. The shared-memory transports' JSON-only answers are checked too."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.events import LevelResult
from engine.load.sweep import run_sweep
from engine.profiles import Load
from engine.record.reader import Recording
from engine.triton.answer_check import AnswerCheck, AnswerSpec, ShmOutput
from engine.triton.api import TritonApi
from engine.triton.target import Target, describe_target
from tests.reliability.hostile_server import (
    HostileTriton,
    Reply,
    Seen,
    binary_answer,
    remote_profile,
)

ROOT = Path(__file__).resolve().parents[3]
BINARY = b"\0" * 16  # OUTPUT0 of one request: FP32 [1, 4]


def _output(**changes: Any) -> dict[str, Any]:
    output = {"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 4], "parameters": {"binary_data_size": 16}}
    output.update(changes)
    return output


def _header(*outputs: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"model_name": "m", "model_version": "1", "outputs": list(outputs), **top}


GOOD = binary_answer(_header(_output()))
MALFORMED = {  # case -> (the answer, what the error message says)
    "json_list_header": (binary_answer([_output()]), "inference header is a JSON list"),
    "non_numeric_binary_data_size": (binary_answer(_header(_output(parameters={"binary_data_size": "sixteen"}))),
                                     "binary_data_size is \"sixteen\""),
    "header_longer_than_body": (binary_answer(_header(_output()), header_length=len(json.dumps(_header(_output()))) + 40),
                                "inference header of"),
    "output_parameters_a_list": (binary_answer(_header(_output(parameters=[16]))), "parameters is a JSON list"),
    "top_parameters_a_string": (binary_answer(_header(_output(), parameters="fast")), "'parameters' is a JSON string"),
    "missing_output": (binary_answer(_header(_output(name="OUTPUT1"))), "outputs OUTPUT0 missing"),
    "no_outputs": (binary_answer(_header(), b""), "outputs OUTPUT0 missing"),
    "wrong_datatype": (binary_answer(_header(_output(datatype="INT32"))), "datatype 'INT32', the model's is 'FP32'"),
    "binary_sizes_do_not_add_up": (binary_answer(_header(_output()), BINARY[:12]), "binary data of 12 bytes"),
    "size_not_the_shape": (binary_answer(_header(_output(shape=[1, 3])), BINARY), "16 bytes for shape [1, 3] of FP32"),
    "json_outputs_a_dict": (Reply(200, {"outputs": {"OUTPUT0": [0, 0, 0, 0]}}), "'outputs' is a JSON object"),
}


def _run(tmp_path: Path, srv: HostileTriton) -> tuple[subprocess.CompletedProcess[str], LevelResult]:
    profile = remote_profile(tmp_path / "answers.toml", srv.where)
    # a window ends at 300 ms once it holds 10 answers (the profile's 50 take the hostile server
    # over 2 s), so each window holds at least two of one-in-five bad answers
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "--record", "--output", str(tmp_path), "--profile", profile,
                           "--set", "load.min_window_requests=10"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    recordings = sorted(tmp_path.glob("*.sqlite"))
    assert recordings, proc.stdout + proc.stderr
    with Recording.open(recordings[0]) as rec:
        (level,) = [e for e in rec.events(("level_result",)) if isinstance(e, LevelResult)]
    assert "Traceback" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    return proc, level


def _checked(reply: Reply) -> str | None:
    """What the load workers' answer check says of ``reply`` (the HTTP transport's call)."""
    ihl = reply.headers.get("Inference-Header-Content-Length")
    return AnswerCheck(AnswerSpec({"OUTPUT0": "FP32"})).check_body(reply.encoded(), int(ihl) if ihl else None)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_every_malformed_answer_is_named_by_the_check(case):
    answer, said = MALFORMED[case]
    problem = _checked(answer)
    assert problem is not None and said in problem, problem
    assert _checked(GOOD) is None and _checked(Reply(200, _header(_output(parameters={}, data=[0.0] * 4)))) is None


@pytest.mark.slow
def test_a_malformed_answer_fails_the_run_end_to_end(tmp_path):
    """One case through the whole CLI (the check above names every case): counted, named in the
    recording, the level failed and the exit code 1."""
    answer, said = MALFORMED["header_longer_than_body"]
    with HostileTriton(infer=answer) as srv:
        proc, level = _run(tmp_path, srv)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert level.status == "failed" and level.requests == 0, level
    assert level.errors > 1 and level.errors_by_kind == {"malformed_answer": level.errors}, level.errors_by_kind
    assert any(said in m for m in level.error_messages), level.error_messages
    assert "malformed_answer" in proc.stdout


@pytest.mark.slow
def test_a_few_malformed_answers_among_good_ones_still_fail_the_run(tmp_path):
    """One answer in five malformed (each a different way): the good ones are measured, the bad
    ones counted, and the run does not end "ok"."""
    calls = iter(range(10**9))
    bad = [MALFORMED[c][0] for c in sorted(MALFORMED)]

    def mostly_good(_seen: Seen) -> Reply:
        n = next(calls)
        return bad[(n // 5) % len(bad)] if n % 5 == 4 else GOOD

    with HostileTriton(infer=mostly_good) as srv:
        proc, level = _run(tmp_path, srv)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert level.status == "failed" and level.requests > 0, level
    assert level.errors_by_kind.get("malformed_answer", 0) > 0, level.errors_by_kind
    assert "answers were malformed" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.slow
def test_good_answers_pass(tmp_path):
    """Good binary answers end the run ok (good JSON ones pass the check above)."""
    with HostileTriton(infer=GOOD) as srv:
        proc, level = _run(tmp_path, srv)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert level.errors == 0 and level.requests > 0, level.error_messages


# --------------------------------------------------------------------------- shared memory


def _shm_answer(change: str) -> Any:
    """A JSON-only answer to a system_shm request, naming the region the request asked for
    (``change``: what to get wrong)."""

    def answer(seen: Seen) -> Reply:
        asked = json.loads(seen.body)["outputs"][0]["parameters"]
        params = {"shared_memory_region": asked["shared_memory_region"],
                  "shared_memory_byte_size": asked["shared_memory_byte_size"]}
        if change == "region":
            params["shared_memory_region"] = "someone-elses"
        if change == "byte_size":
            params["shared_memory_byte_size"] = "16"
        output = {"name": "OUTPUT1" if change == "missing" else "OUTPUT0",
                  "datatype": "BF16" if change == "datatype" else "FP32", "shape": [1, 4], "parameters": params}
        return Reply(200, {"model_name": "m", "outputs": [output]})

    return answer


async def _shm_sweep(srv: HostileTriton) -> LevelResult:
    target = Target(srv.url, "m")
    info = await describe_target(target)
    load = Load(concurrency=[1], transport="system_shm", window_ms=300, warmup_s=0, max_windows=3, stable_windows=2,
                workers=1, request_timeout_s=2.0, min_window_requests=1)
    (result,) = await run_sweep(TritonApi(target, info), load, lambda _e: None, asyncio.Event())
    return result


SHM_CHANGES = ("region", "byte_size", "missing", "datatype")


@pytest.mark.slow
def test_shared_memory_answers_are_checked():
    """Each answer wrong in one of SHM_CHANGES' ways, in turn, in one sweep: not one passes (no
    request measured), every error is a malformed answer, and each way was answered."""
    answers = {change: _shm_answer(change) for change in SHM_CHANGES}
    served = dict.fromkeys(SHM_CHANGES, 0)
    calls = iter(range(10**9))

    def each_in_turn(seen: Seen) -> Reply:
        change = SHM_CHANGES[next(calls) % len(SHM_CHANGES)]
        served[change] += 1
        return answers[change](seen)

    with HostileTriton(infer=each_in_turn) as srv:
        result = asyncio.run(_shm_sweep(srv))
    assert result.status == "failed" and result.requests == 0, result
    assert result.errors_by_kind == {"malformed_answer": result.errors} and result.errors > 0, result.errors_by_kind
    assert all(served.values()), served


@pytest.mark.slow
def test_a_shared_memory_answer_that_names_the_region_asked_for_passes():
    with HostileTriton(infer=_shm_answer("")) as srv:
        result = asyncio.run(_shm_sweep(srv))
    assert result.errors == 0 and result.requests > 0, result.error_messages
    requests = [s for s in srv.seen if s.path.endswith("/infer")]
    assert requests and "binary_data_size" not in requests[0].body.decode()  # a JSON-only request


# --------------------------------------------------------------------------- the check itself


def _body(header: dict[str, Any], binary: bytes = BINARY) -> tuple[bytearray, int]:
    head = json.dumps(header).encode()
    return bytearray(b"HTTP/1.1 200 OK\r\n\r\n" + head + binary), len(head)


def test_an_answer_like_the_last_good_one_but_for_a_byte_is_checked_in_full():
    check = AnswerCheck(AnswerSpec({"OUTPUT0": "FP32"}))
    start = len(b"HTTP/1.1 200 OK\r\n\r\n")
    good, n = _body(_header(_output()))
    assert check.check(good, start, len(good) - start, n) is None
    assert check.check(good, start, len(good) - start, n) is None  # the cheap path
    same_length, n2 = _body(_header(_output(datatype="INT8")))  # as long, one word differs
    assert n2 == n and len(same_length) == len(good)
    assert "datatype 'INT8'" in (check.check(same_length, start, len(same_length) - start, n2) or "")
    assert check.check(good, start, len(good) - start - 4, n) is not None  # a body 4 bytes short
    assert check.check(good, start, len(good) - start, None) is not None  # no header length: all of it JSON


def test_a_shared_memory_output_must_name_its_region_and_offset():
    spec = AnswerSpec({"OUTPUT0": "FP32"}, {"OUTPUT0": ShmOutput("out", 64, 16)})
    check = AnswerCheck(spec)
    for params, ok in [({"shared_memory_region": "out", "shared_memory_byte_size": 16, "shared_memory_offset": 64}, True),
                       ({"shared_memory_region": "out"}, True),
                       ({}, True),  # Triton's answer: the output's name, datatype and shape only
                       ({"binary_data_size": 16}, False),
                       ({"shared_memory_region": "out", "shared_memory_offset": 0}, False),
                       ({"shared_memory_region": "out", "shared_memory_byte_size": 17}, False),
                       ({"shared_memory_region": "elsewhere"}, False)]:
        body, _n = _body(_header(_output(parameters=params)), b"")
        start = len(b"HTTP/1.1 200 OK\r\n\r\n")
        assert (check.check(body, start, len(body) - start, None) is None) == ok, params
