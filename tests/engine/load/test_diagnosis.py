"""GPUSCALE_LOAD_DIAG parsing (engine/load/diagnosis.py): names with values, bare names as 1."""

from engine.load.diagnosis import DIAG_ENV, diagnosis_knobs


def test_names_values_and_bare_switches():
    assert diagnosis_knobs("sndbuf=4194304, burst,,cuda_gpu=1") == {"sndbuf": 4194304, "burst": 1, "cuda_gpu": 1}
    assert diagnosis_knobs("") == {}


def test_read_from_the_environment_by_default(monkeypatch):
    monkeypatch.setenv(DIAG_ENV, "cuda_each,stagger_us=10000")
    assert diagnosis_knobs() == {"cuda_each": 1, "stagger_us": 10000}
    monkeypatch.delenv(DIAG_ENV)
    assert diagnosis_knobs() == {}
