"""The training bill through a recording: the dataset size travels with the recorded profile,
the report shows the bill; a recording made before the key existed loads and reports the line
that says what to set, with the stop rule still there."""

from __future__ import annotations

from pathlib import Path

from engine.events import SessionStarted
from engine.record.doc import to_markdown, to_text
from engine.record.exporters import export
from engine.record.reader import Recording
from engine.record.recording_report import build_report
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session

STOP = ("mlp_6.9m ddp weak b32: stop at 4 GPUs, the largest config measured, with no limit found: every step "
        "still paid; the last one (2x -> 4x) adds +790 samples/s per added GPU (mean samples/s)")


def test_the_bill_survives_the_round_trip_and_reaches_the_report(tmp_path: Path) -> None:
    path = record_events(tmp_path / "run.sqlite", synthetic_session(SyntheticRun(dataset_size=1_000_000)))
    with Recording.open(path) as recording:
        summary = recording.summary()
        doc = build_report(summary)
        written = export(recording, "md", tmp_path)  # the exporter writes the same report
    assert summary.dataset_size == 1_000_000 and summary.cost_per_hour == 2.0
    markdown = to_markdown(doc)
    assert "### Training bill" in markdown and "| $/epoch 95% CI |" in markdown
    # 4 GPUs: 3,400 samples/s (3,332-3,468), the whole $2/hr box
    row = next(line for line in markdown.splitlines() if line.startswith("| mlp_6.9m") and "| 4 |" in line and "$" in line)
    assert "| 4m54s | 4m48s-5m00s | $2.00 | $0.163 | $0.160-$0.167 |" in row
    assert "Priced at $2/hr for the box of 4 GPUs: $0.500/hr per GPU, pro rata." in markdown
    assert STOP in " ".join(markdown.split())
    assert "| 4m54s | 4m48s-5m00s |" in Path(written).read_text()


def test_a_recording_from_before_the_dataset_size_still_loads_and_says_what_to_set(tmp_path: Path) -> None:
    events = synthetic_session(SyntheticRun())
    for event in events:
        if isinstance(event, SessionStarted):
            del event.profile["probe"]["dataset_size"]  # as an older version recorded its profile
    path = record_events(tmp_path / "old.sqlite", events)
    with Recording.open(path) as recording:
        summary = recording.summary()
        text = to_text(build_report(summary))
    assert summary.dataset_size is None and len(summary.probe) == 3
    assert "Set probe.dataset_size (samples per epoch) for the time and $ per epoch." in text
    assert "epoch 95% CI" not in text and STOP in " ".join(text.split())
