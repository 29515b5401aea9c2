"""The GPU metrics a recording keeps, declared once.

Each ``GpuField`` says where a ``GpuReading`` attribute goes: its column in the recording's
``gpu_samples`` table (schema.py builds the table from ``FIELDS``, the recorder fills it), how
the summary aggregates it over the session and over each level's measured span (summary.py),
and its perf_analyzer CSV column (export_csv.py). ``REPORT_COLUMNS`` are the report's
per-GPU telemetry columns. A new metric: its attribute on ``GpuReading`` (engine/events.py),
its reading at the source (engine/telemetry/nvml_gpus.py or triton_metrics.py), one entry here.

Recordings written before a field existed lack its column: readers select NULL in its place
(``present_columns``), so the metric shows as not available there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine import format as fmt
from engine.analysis.gpu_sharing import reading_sharing

# what a summary figure is: "mean" over samples (sum / count, so buckets merge exactly) or "max"
AGGREGATES = ("mean", "max")


@dataclass(frozen=True)
class GpuField:
    reading: str  # the GpuReading attribute
    column: str  # its gpu_samples column; also its key in the summary's per-GPU figures
    sql_type: str  # "REAL" or "INTEGER"
    session: tuple[str, ...]  # whole-session figures per GPU, from AGGREGATES: key "<column>_<agg>"
    in_level: str  # one figure per GPU over a level's measured span: "mean" or "max"
    csv_header: str | None = None  # perf_analyzer's --collect-metrics column, None: not exported
    csv_scale: float = 1.0
    csv_integer: bool = False
    # the column's value from a recorded reading (a dict), where it is not the attribute itself
    derive: Callable[[Mapping[str, Any]], Any] | None = None

    def value(self, reading: Mapping[str, Any]) -> Any:
        return self.derive(reading) if self.derive is not None else reading.get(self.reading)


def _stubs(reading: Mapping[str, Any]) -> int | None:
    found = reading_sharing(dict(reading))
    return found.stubs if found else None


def _mps_server(reading: Mapping[str, Any]) -> int | None:
    found = reading_sharing(dict(reading))
    return int(found.mps) if found else None


# Order: perf_analyzer's CSV column order (the table's column order does not matter to readers).
FIELDS: tuple[GpuField, ...] = (
    GpuField("util_gpu", "util", "REAL", ("mean", "max"), "mean", "Avg GPU Utilization",
             csv_scale=0.01),  # percent; perf_analyzer reports utilization as a fraction
    GpuField("power_w", "power", "REAL", ("mean", "max"), "mean", "Avg GPU Power Usage"),  # watts
    GpuField("mem_used", "mem_used", "INTEGER", ("max",), "max", "Max GPU Memory Usage", csv_integer=True),  # bytes
    GpuField("mem_total", "mem_total", "INTEGER", ("max",), "max", "Total GPU Memory", csv_integer=True),
    # from NVML's process list: Python-backend stubs on the GPU, and whether an MPS server held it
    # (engine/analysis/gpu_sharing.py)
    GpuField("processes", "python_stubs", "INTEGER", ("max",), "max", derive=_stubs),
    GpuField("processes", "mps_server", "INTEGER", ("max",), "max", derive=_mps_server),
)
BY_COLUMN = {f.column: f for f in FIELDS}
TIMELINE = BY_COLUMN["util"]  # the report's over-time chart (a field with a "mean" session figure)


Stats = Mapping[str, float | None]  # "<column>_<agg>" -> value, one GPU over the whole session

# The report's per-GPU telemetry table (after GPU, Name, UUID; before Source): heading, cell.
REPORT_COLUMNS: tuple[tuple[str, Callable[[Stats], str]], ...] = (
    ("Util mean", lambda s: fmt.percent_points(s.get("util_mean"))),
    ("Util max", lambda s: fmt.percent_points(s.get("util_max"))),
    ("Memory max / total", lambda s: f"{fmt.gib(s.get('mem_used_max'))} / {fmt.gib(s.get('mem_total_max'))} GiB"),
    ("Power mean", lambda s: fmt.watts(s.get("power_mean"))),
    ("Power max", lambda s: fmt.watts(s.get("power_max"))),
)


def table_ddl() -> str:
    """gpu_samples: one row per GPU reading (seq: the gpu_sample event's; gpu: gpus.id)."""
    columns = "".join(f", {f.column} {f.sql_type}" for f in FIELDS)
    return f"CREATE TABLE gpu_samples (seq INTEGER NOT NULL, ts REAL NOT NULL, gpu INTEGER NOT NULL{columns})"


def column_or_null(field: GpuField, present: frozenset[str], table: str = "") -> str:
    """The column in a SELECT (``table``: "s." for an alias), or NULL where the recording
    predates the field."""
    return f"{table}{field.column}" if field.column in present else "NULL"
