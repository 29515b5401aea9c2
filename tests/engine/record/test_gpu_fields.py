"""The GPU field registry (engine/record/gpu_fields.py) drives the recording, summary, report and CSV."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from engine.events import GpuReading
from engine.record.doc import to_markdown
from engine.record.export_csv import levels_csv
from engine.record.gpu_fields import FIELDS, REPORT_COLUMNS, TIMELINE
from engine.record.reader import Recording
from engine.record.recording_report import build_report


def test_every_field_reads_a_gpu_reading_attribute() -> None:
    attributes = set(GpuReading.__struct_fields__)
    assert {f.reading for f in FIELDS} <= attributes
    assert len({f.column for f in FIELDS}) == len(FIELDS)
    assert "mean" in TIMELINE.session  # the timeline is built from the mean's sums


def test_the_recording_summary_and_exports_follow_the_registry(recording_4x: Path) -> None:
    with Recording.open(recording_4x) as r:
        columns = [row[1] for row in r.query("PRAGMA table_info(gpu_samples)")]
        summary = r.summary()
        report = to_markdown(build_report(summary))
    assert columns == ["seq", "ts", "gpu", *(f.column for f in FIELDS)]
    header = levels_csv(summary).splitlines()[0].split(",")
    assert header[-len([f for f in FIELDS if f.csv_header]):] == [f.csv_header for f in FIELDS if f.csv_header]
    gpu = summary.gpus[0]
    assert set(gpu.stats) == {f"{f.column}_{agg}" for f in FIELDS for agg in f.session}
    assert all(value is not None for value in gpu.stats.values())  # the synthetic run has every metric
    level = summary.levels[0]
    assert set(level.gpu) == {f.column for f in FIELDS} and all(level.gpu.values())
    assert all(heading in report for heading, _cell in REPORT_COLUMNS)


def test_a_recording_from_before_a_field_reads_it_as_not_available(tmp_path: Path, recording_4x: Path) -> None:
    """A metric added later: the recordings written before have no column for it."""
    older = tmp_path / "older.sqlite"
    shutil.copy(recording_4x, older)
    conn = sqlite3.connect(older)
    conn.execute("ALTER TABLE gpu_samples DROP COLUMN power")
    conn.commit()
    conn.close()
    with Recording.open(recording_4x) as r:
        full = r.summary()
    with Recording.open(older) as r:
        partial = r.summary()
        assert "Power mean" in to_markdown(build_report(partial))  # the report still renders, power as n/a
        assert "Avg GPU Power Usage" in levels_csv(partial)
    for a, b in zip(full.gpus, partial.gpus, strict=True):
        assert b.stats["power_mean"] is None and b.stats["power_max"] is None
        assert {k: v for k, v in a.stats.items() if not k.startswith("power")} == \
               {k: v for k, v in b.stats.items() if not k.startswith("power")}
    for a, b in zip(full.levels, partial.levels, strict=True):
        assert b.gpu["power"] == {} and a.gpu["power"]
        assert a.gpu_util == b.gpu_util
    assert full.gpu_timeline == partial.gpu_timeline
