"""A recording says which input data its sweep sent (path, sha256, entries): the report shows it,
and compare notes runs that sent different data, as it notes different transports."""

from __future__ import annotations

from pathlib import Path

from engine.events import InputDataUsed, SessionStarted
from engine.record.compare import compare
from engine.record.exporters import export
from engine.record.reader import Recording
from engine.record.summary import summarize
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session

RUN = SyntheticRun(variant="1x", gpu_count=1, profile_name="1x_rtx4080", levels=[1, 4], probe=False)


def _recording(tmp_path: Path, name: str, sha: str | None) -> Path:
    """The synthetic session, with the input data of ``sha`` announced after its start (None:
    random tensors, as load.data made them)."""
    events = synthetic_session(RUN)
    if sha is not None:
        at = next(i for i, e in enumerate(events) if isinstance(e, SessionStarted)) + 1
        events.insert(at, InputDataUsed(ts=events[at - 1].ts, path="/data/photos.json", sha256=sha, entries=12,
                                        requests=12, source="json", validated=True))
    return record_events(tmp_path / name, events)


def test_the_recording_and_its_report_name_the_data(tmp_path: Path) -> None:
    path = _recording(tmp_path, "a.sqlite", "ab" * 32)
    with Recording.open(path) as rec:
        summary = summarize(rec)
        assert summary.input_data == {"path": "/data/photos.json", "sha256": "ab" * 32, "entries": 12, "requests": 12,
                                      "source": "json", "validated": True}
        report = Path(export(rec, "md", tmp_path)).read_text()
    assert "/data/photos.json (12 entries, sha256 abababababab, outputs checked against its validation_data)" in report
    with Recording.open(_recording(tmp_path, "r.sqlite", None)) as rec:
        assert summarize(rec).input_data is None and summarize(rec).inputs_text == "random tensors"


def test_compare_notes_runs_that_sent_different_data(tmp_path: Path) -> None:
    same = [_recording(tmp_path, f"{n}.sqlite", "ab" * 32) for n in ("a", "b")]
    other = _recording(tmp_path, "c.sqlite", "cd" * 32)
    generated = _recording(tmp_path, "d.sqlite", None)

    def notes(paths: list[Path]) -> str:
        recordings = [Recording.open(p) for p in paths]
        try:
            return "\n".join(compare(recordings).notes)
        finally:
            for r in recordings:
                r.close()

    assert "input data differs" not in notes(same)
    assert "input data differs" in notes([same[0], other]) and "sha256 cdcdcdcdcdcd" in notes([same[0], other])
    mixed = notes([same[0], generated])
    assert "input data differs" in mixed and "random tensors" in mixed
