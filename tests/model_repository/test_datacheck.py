"""The datacheck model against perf_analyzer: with the committed input-data file
(tests/data/datacheck_input.json: BERT token ids, real JPEGs, validation_data) it answers every
request and perf_analyzer's own output check passes; with perf_analyzer's random data it refuses
them. So the file is what a real user's data would be, for both tools. The ensemble's file holds
the same inputs and the ensemble's outputs (perf_analyzer wants every output of the model it
measures in validation_data)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench.tools import PA_DIR, SetupError, ensure_perf_analyzer
from tests.photo_files import raw_photos_document

DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "datacheck_input.json"
ENSEMBLE_FILE = DATA_FILE.with_name("datacheck_ensemble_input.json")


@pytest.fixture(scope="module")
def perf_analyzer() -> tuple[Path, dict[str, str]]:
    if not (PA_DIR / "perf_analyzer").exists():  # set up by `python -m bench setup` (a download)
        pytest.skip(f"perf_analyzer is not set up in {PA_DIR} (python -m bench setup)")
    try:
        return ensure_perf_analyzer()
    except SetupError as exc:
        pytest.skip(f"perf_analyzer does not run here: {exc}")


def _run(pa: tuple[Path, dict[str, str]], url: str, model: str, *extra: str) -> subprocess.CompletedProcess[str]:
    binary, env = pa
    cmd = [str(binary), "-m", model, "-u", url.removeprefix("http://"), "--concurrency-range", "2",
           "--measurement-interval", "300", "-s", "90", "-r", "10", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_the_data_file_is_real_data_in_perf_analyzers_format():
    document = json.loads(DATA_FILE.read_text())
    assert len(document["data"]) == len(document["validation_data"]) == 3
    for entry in document["data"]:
        tokens = entry["TOKENS"]["content"]
        assert tokens[0] == 101 and entry["TOKENS"]["shape"] == [len(tokens)]
        assert set(entry) == {"TOKENS", "IMAGE", "SCALE"}
        assert "b64" in entry["IMAGE"] and "b64" in entry["SCALE"]  # perf_analyzer reads FP16 only as b64
    assert DATA_FILE.stat().st_size < 5000
    ensemble = json.loads(ENSEMBLE_FILE.read_text())
    assert ensemble["data"] == document["data"]
    for want, expected in zip(ensemble["validation_data"], document["validation_data"], strict=True):
        label = f"{expected['TOKEN_COUNT'][0]} tokens, {expected['IMAGE_BYTES'][0]} bytes"
        assert want == {"SCORE": expected["SCORE"], "LABEL": [label]}


@pytest.mark.server
@pytest.mark.slow
@pytest.mark.parametrize("model, data_file", [
    ("datacheck", DATA_FILE), ("datacheck_nobatch", DATA_FILE),
    ("datacheck_ensemble", ENSEMBLE_FILE),  # the same inputs; the ensemble's outputs expected
    ("datacheck_bls", DATA_FILE),  # the file expects IMAGE_BYTES, which the BLS model lacks: ignored
])
def test_perf_analyzer_with_the_file_has_no_errors(shapes_server, perf_analyzer, model, data_file):
    real = _run(perf_analyzer, shapes_server.http_url, model, "--input-data", str(data_file))
    out = real.stdout + real.stderr
    assert "3 step/steps" in out and "had error" not in out, out[-1500:]
    # on a busy box its windows may disagree (exit 2, no figures): that is not an error
    assert real.returncode == 0 or "Failed to obtain stable measurement" in out, out[-1500:]


@pytest.mark.server
@pytest.mark.slow
def test_perf_analyzers_random_data_is_refused(shapes_server, perf_analyzer):
    random = _run(perf_analyzer, shapes_server.http_url, "datacheck", "--shape", "TOKENS:8")
    out = random.stdout + random.stderr
    assert random.returncode != 0
    assert "not 101 ([CLS]): not token ids" in out, out[-1500:]


@pytest.mark.server
@pytest.mark.slow
def test_perf_analyzer_checks_the_outputs_against_the_files_validation_data(shapes_server, perf_analyzer, tmp_path):
    """The expected outputs are checked, not merely carried: one wrong value fails the run."""
    document = json.loads(DATA_FILE.read_text())
    document["validation_data"][1]["IMAGE_BYTES"][0] += 1
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(document))
    run = _run(perf_analyzer, shapes_server.http_url, "datacheck", "--input-data", str(wrong))
    assert run.returncode != 0
    assert "Output doesn't match expected output" in run.stdout + run.stderr


@pytest.mark.server
@pytest.mark.slow
def test_perf_analyzer_takes_a_raw_photos_file_as_our_engine_does(shapes_server, perf_analyzer, tmp_path):
    """`data from-images --raw` writes each photo as perf_analyzer's serialized BYTES element: with
    token ids beside it, perf_analyzer sends the JPEGs and its output check passes (our engine
    with the same file: tests/engine/load/test_datacheck_input_data.py)."""
    document, sizes = raw_photos_document(tmp_path)
    document["validation_data"] = [{"IMAGE_BYTES": [n], "TOKEN_COUNT": [3], "SCORE": [0.795]} for n in sizes]
    out = tmp_path / "raw.json"
    out.write_text(json.dumps(document))
    run = _run(perf_analyzer, shapes_server.http_url, "datacheck", "--input-data", str(out))
    text = run.stdout + run.stderr
    assert "2 step/steps" in text and "had error" not in text and "doesn't match" not in text, text[-1500:]
    assert run.returncode == 0 or "Failed to obtain stable measurement" in text, text[-1500:]


@pytest.mark.server
@pytest.mark.slow
def test_perf_analyzer_ignores_an_input_the_model_lacks_and_compares_floats_exactly(shapes_server, perf_analyzer,
                                                                                     tmp_path):
    """What our reader follows (an unknown input name is not sent) and where it differs on purpose
    (floats within load.validate_tolerance, where perf_analyzer wants the same bytes)."""
    import numpy as np

    document = json.loads(DATA_FILE.read_text())
    for entry in document["data"]:
        entry["PROMPT"] = ["not an input of datacheck"]
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps(document))
    run = _run(perf_analyzer, shapes_server.http_url, "datacheck", "--input-data", str(extra))
    text = run.stdout + run.stderr
    assert "had error" not in text and (run.returncode == 0 or "Failed to obtain stable" in text), text[-1500:]
    for want in document["validation_data"]:  # one FP32 step up from the exact answer
        want["SCORE"][0] = float(np.nextafter(np.float32(want["SCORE"][0]), np.float32(2)))
    ulp = tmp_path / "ulp.json"
    ulp.write_text(json.dumps(document))
    run = _run(perf_analyzer, shapes_server.http_url, "datacheck", "--input-data", str(ulp))
    assert run.returncode != 0 and "Output doesn't match expected output" in run.stdout + run.stderr
