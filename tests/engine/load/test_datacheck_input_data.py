"""Our engine with --input-data on the datacheck models (tests/conftest.py's shapes_server): the
models refuse random data (tests/engine/load/test_model_shapes.py) and accept the data file, the
same file perf_analyzer takes (tests/model_repository/test_datacheck.py). Every model shape
(batching, max_batch_size 0, an ensemble with its own file, a BLS model) over each transport:
no error, every entry sent, the validation_data checked (a changed expected value is a
wrong_answer naming its entry). A file made by `data from-images --raw` reaches the model as
JPEGs; and the CLI's run records the data file with its sha256."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.record.exporters import export
from engine.record.reader import Recording
from engine.record.summary import summarize
from engine.triton.target import Target, TargetInfo, describe_target
from tests.engine.load.conftest import quick_load, sweep
from tests.photo_files import raw_photos_document

pytestmark = [pytest.mark.server, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[3]
DATA_FILE = REPO / "tests" / "data" / "datacheck_input.json"
ENSEMBLE_FILE = DATA_FILE.with_name("datacheck_ensemble_input.json")
FILES = {"datacheck": DATA_FILE, "datacheck_nobatch": DATA_FILE, "datacheck_ensemble": ENSEMBLE_FILE,
         "datacheck_bls": DATA_FILE}


def _describe(url: str, model: str) -> tuple[Target, TargetInfo]:
    target = Target(url, model)  # no input_shapes: TOKENS' length comes from each entry's shape
    return target, asyncio.run(describe_target(target))


def _changed(tmp_path: Path, source: Path, entries: list[int]) -> str:
    """A copy of ``source`` whose expected SCORE of each of ``entries`` is 1 higher."""
    document = json.loads(source.read_text())
    for k in entries:
        document["validation_data"][k]["SCORE"][0] += 1.0
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(document))
    return str(path)


def _sweep(url: str, model: str, transport: str, data: str, **load):
    """One level of the data file's requests: no warm-up and two windows (each 300 ms, or until it
    holds 20 answers), as no check here reads a rate, only what was sent and how it was answered."""
    target, info = _describe(url, model)
    settings = dict(concurrency=[2], transport=transport, input_data=data, stability_percent=50, warmup_s=0,
                    stable_windows=2, max_windows=2)
    results, events = asyncio.run(sweep(target, info, quick_load(**{**settings, **load})))
    return results, events


@pytest.mark.parametrize("transport", ["http", "grpc", "system_shm"])
@pytest.mark.parametrize("model", list(FILES))
def test_the_data_file_is_accepted_and_its_outputs_match(shapes_server, model, transport):
    results, events = _sweep(shapes_server.http_url, model, transport, str(FILES[model]))
    (used,) = events.of("input_data")
    assert (used.entries, used.requests, used.validated) == (3, 3, True)
    assert used.sha256 == hashlib.sha256(FILES[model].read_bytes()).hexdigest()
    (level,) = results
    assert level.errors == 0 and level.requests >= 3 and level.status != "failed", (
        level.errors_by_kind, level.error_messages)
    notes = [e.message for e in events.of("warning") if "validation_data names" in e.message]
    # the BLS model lacks IMAGE_BYTES, which the file expects: not compared, as perf_analyzer does
    assert len(notes) == (1 if model == "datacheck_bls" else 0) and all("'IMAGE_BYTES'" in n for n in notes)


@pytest.mark.parametrize("model", list(FILES))
def test_one_changed_expected_value_is_a_wrong_answer_naming_its_entry(shapes_server, tmp_path, model):
    results, _ = _sweep(shapes_server.http_url, model, "http", _changed(tmp_path, FILES[model], [1]))
    (level,) = results
    assert level.status == "failed" and set(level.errors_by_kind) == {"wrong_answer"}, level.errors_by_kind
    assert level.requests > 0  # entries 0 and 2 were answered as expected
    message = " | ".join(level.error_messages)
    assert "entry 1: output 'SCORE' element 0: expected 1.3055, got 0.3055" in message, message


@pytest.mark.parametrize("transport", ["http", "grpc", "system_shm"])
def test_every_entry_is_sent(shapes_server, tmp_path, transport):
    """Every entry's expected SCORE changed: each of the three entries comes back as a wrong answer."""
    results, _ = _sweep(shapes_server.http_url, "datacheck", transport, _changed(tmp_path, DATA_FILE, [0, 1, 2]))
    (level,) = results
    assert level.requests == 0 and set(level.errors_by_kind) == {"wrong_answer"}, level.errors_by_kind
    named = {k for k in range(3) for m in level.error_messages if m.split(": output")[0].endswith(f"entry {k}")}
    assert named == {0, 1, 2}, level.error_messages


def test_a_raw_photos_file_reaches_the_model_as_jpegs(shapes_server, tmp_path):
    """`data from-images --raw`: each photo one BYTES element; with token ids beside it, the
    model accepts it and counts each JPEG's bytes as the file holds them."""
    document, sizes = raw_photos_document(tmp_path)
    document["validation_data"] = [{"IMAGE_BYTES": [n], "TOKEN_COUNT": [3]} for n in sizes]
    out = tmp_path / "raw.json"
    out.write_text(json.dumps(document))
    results, events = _sweep(shapes_server.http_url, "datacheck", "http", str(out))
    (level,) = results
    assert events.of("input_data")[0].entries == 2
    assert level.errors == 0 and level.requests >= 2, (level.errors_by_kind, level.error_messages)


def test_the_cli_run_records_the_data_file_and_its_sha256(shapes_server, tmp_path):
    sets = ["server.kind=remote", f"server.url={shapes_server.http_url}", "model.name=datacheck",
            "load.concurrency=2", "load.window_ms=300", "load.warmup_s=0.2", "load.max_windows=3",
            "load.min_window_requests=20", "load.stability_percent=90", "load.workers=1",
            "load.max_trials=1", "load.contended_percent=100"]  # the box-noise rule off (tests/conftest.py)
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--record", "--no-check", "--input-data",
                           "tests/data/datacheck_input.json", "--output", str(tmp_path),
                           *(a for s in sets for a in ("--set", s))],
                          cwd=REPO, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    sha = hashlib.sha256(DATA_FILE.read_bytes()).hexdigest()
    (path,) = tmp_path.glob("*.sqlite")
    with Recording.open(path) as rec:
        summary = summarize(rec)
        report = Path(export(rec, "md", tmp_path)).read_text()
    assert summary.input_data is not None
    assert (summary.input_data["path"], summary.input_data["sha256"]) == (str(DATA_FILE), sha)
    assert f"{DATA_FILE} (3 entries, sha256 {sha[:12]}" in report
