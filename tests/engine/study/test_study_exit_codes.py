"""The study's exit code: bad input (2) is the user's only where the user gave it; a config the
tool built (the one --scale-out adds, or a variant after one whose input was accepted) that is
refused is the study failing (1), recorded as failed in the index, and the study goes on. Each
variant's session is a stand-in that ends as told (no server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import events as ev
from engine.bus import EventBus
from engine.outcome import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from engine.profiles import load_profile
from engine.study import study_source
from engine.study.index import read_index
from engine.study.study_source import StudySource, study_exit_code, variant_exit_code

REFUSED = "endpoints are not apples-to-apples: model config differs in instance_group"


def test_variant_exit_code():
    assert variant_exit_code(EXIT_BAD_INPUT, built=True) == EXIT_FAILED
    assert variant_exit_code(EXIT_BAD_INPUT, built=False) == EXIT_BAD_INPUT
    assert variant_exit_code(EXIT_FAILED, built=False) == EXIT_FAILED
    assert variant_exit_code(EXIT_OK, built=True) == EXIT_OK
    assert study_exit_code([EXIT_OK, EXIT_OK, variant_exit_code(EXIT_BAD_INPUT, True)], False) == EXIT_FAILED


def _study(tmp_path: Path, monkeypatch, ends: dict[str, tuple[int, str | None]], variants: list[str],
           scale_out: bool) -> tuple[StudySource, list[ev.Event]]:
    ran: list[str] = []

    class Ends:  # a session that ends at once as ``ends`` says for its variant
        def __init__(self, profile, options) -> None:
            self.variant = profile.model.variant
            self.bus = EventBus()
            self.exit_code, self.error = ends.get(self.variant, (EXIT_OK, None))
            self.recording_path = None

        def start(self) -> None:
            ran.append(self.variant)

        def join(self, timeout: float | None = None) -> bool:
            return True

        def stop(self) -> None:
            pass

    monkeypatch.setattr(study_source, "Session", Ends)
    study = StudySource(load_profile("local", ["model.name=identity"]), variants, record_dir=tmp_path, gpu_count=0,
                        scale_out=scale_out)
    seen: list[ev.Event] = []
    study.bus.subscribe(seen.append)
    study.prepare()
    study.start()
    assert study.join(60)
    assert ran == [e.variant for e in seen if isinstance(e, ev.StudyVariantFinished)]
    return study, seen


def _finished(seen: list[ev.Event]) -> list[tuple[str, str, int]]:
    return [(e.variant, e.status, e.exit_code) for e in seen if isinstance(e, ev.StudyVariantFinished)]


def test_a_refused_scale_out_config_fails_the_study_not_the_input(tmp_path, monkeypatch):
    study, seen = _study(tmp_path, monkeypatch, {"cpu*2": (EXIT_BAD_INPUT, REFUSED)}, ["cpu", "cpu2"], scale_out=True)
    assert study.variants == ["cpu", "cpu2", "cpu*2"]
    assert study.exit_code == EXIT_FAILED
    assert study.error == f"config cpu*2: {REFUSED}"
    index = read_index(study.index_path)
    (run,) = [r for r in index.runs if r.variant == "cpu*2"]
    assert (run.status, run.exit_code, run.error, run.recording) == ("failed", EXIT_FAILED, REFUSED, None)
    assert index.status == "failed"
    assert _finished(seen)[-1] == ("cpu*2", "failed", EXIT_FAILED)


def test_a_refused_config_after_one_that_ran_fails_the_study_and_it_goes_on(tmp_path, monkeypatch):
    study, seen = _study(tmp_path, monkeypatch, {"cpu2": (EXIT_BAD_INPUT, REFUSED)}, ["cpu", "cpu2"], scale_out=True)
    assert study.exit_code == EXIT_FAILED
    assert _finished(seen) == [("cpu", "ok", EXIT_OK), ("cpu2", "failed", EXIT_FAILED), ("cpu*2", "ok", EXIT_OK)]


@pytest.mark.parametrize("scale_out", [False, True])
def test_bad_input_in_the_first_config_is_the_users_and_stops_the_study(tmp_path, monkeypatch, scale_out):
    study, seen = _study(tmp_path, monkeypatch, {"cpu": (EXIT_BAD_INPUT, "load.input_data: no such file")},
                         ["cpu", "cpu2"], scale_out=scale_out)
    assert study.exit_code == EXIT_BAD_INPUT and study.error == "load.input_data: no such file"
    assert _finished(seen) == [("cpu", "failed", EXIT_BAD_INPUT)]
