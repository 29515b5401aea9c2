"""Export a recording: JSON (complete), CSV (perf_analyzer's columns, one row per level),
Markdown and HTML reports. Files go inside the folder the user chose, under a new name: an
existing file is never replaced."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from engine.errors import UserError
from engine.record.naming import free_name, new_file, safe_output_path

if TYPE_CHECKING:
    from engine.record.compare import Comparison
    from engine.record.reader import Recording


@dataclass(frozen=True)
class Exporter:
    suffix: str
    description: str  # one line, as the export dialog lists it
    write: Callable[[Recording, IO[str]], object]


# The writers import their modules when called: the CLI reads this list for --format's choices on
# every start, and a session never exports (the report modules were a twentieth of its imports).
def _json(recording: Recording, fh: IO[str]) -> object:
    from engine.record.export_json import write_json

    return write_json(recording, fh)


def _csv(recording: Recording, fh: IO[str]) -> object:
    from engine.record.export_csv import levels_csv

    return fh.write(levels_csv(recording.summary()))


def _report(fmt: str) -> Callable[[Recording, IO[str]], object]:
    def write(recording: Recording, fh: IO[str]) -> object:
        from engine.record.doc import to_html, to_markdown
        from engine.record.recording_report import build_report
        from engine.record.timelines import read_timelines

        render = to_markdown if fmt == "md" else to_html
        return fh.write(render(build_report(recording.summary(), timelines=read_timelines(recording))))
    return write


# The one list of export formats: the CLI's --format choices and the TUI's export dialog read it.
# A new format is one entry here (and its writer module).
EXPORTERS: dict[str, Exporter] = {
    "json": Exporter(".json", "JSON: every result, machine-readable", _json),
    "csv": Exporter(".csv", "CSV: perf_analyzer's columns, one row per level", _csv),
    "md": Exporter(".md", "Markdown report", _report("md")),
    "html": Exporter(".html", "HTML report with charts", _report("html")),
}
FORMATS = {name: e.suffix for name, e in EXPORTERS.items()}


def output_path(out_dir: Path, recording_stem: str, fmt: str, name: str | None) -> Path:
    """Where an export goes: ``name`` inside ``out_dir`` (no escaping it, no overwriting), or
    the recording's own name with the format's suffix (made unique)."""
    suffix = FORMATS[fmt]
    out_dir = Path(out_dir).expanduser()
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{out_dir}: not a folder")
    if name is None:
        return free_name(out_dir, recording_stem, suffix)
    path = safe_output_path(out_dir, name)
    if not path.suffix:
        path = path.with_name(path.name + suffix)
    if path.exists():
        raise UserError(f"{path}: already exists; not overwriting it (choose another name)")
    return path


def export(recording: Recording, fmt: str, out_dir: Path, name: str | None = None) -> Path:
    fmt = str(fmt).lower().lstrip(".")
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
    path = output_path(out_dir, recording.path.stem, fmt, name)
    with new_file(path) as fh:
        EXPORTERS[fmt].write(recording, fh)
    return path


def export_compare(comparison: Comparison, fmt: str, out_dir: Path, name: str | None = None) -> Path:
    """A comparison as a Markdown or HTML file (or plain text), with export()'s path rules."""
    fmt = str(fmt).lower().lstrip(".")
    suffix = {"md": ".md", "html": ".html", "text": ".txt"}.get(fmt)
    if suffix is None:
        raise UserError(f"unknown comparison format {fmt!r} (known: md, html, text)")
    out_dir = Path(out_dir).expanduser()
    if name is None:
        path = free_name(out_dir, "comparison", suffix)
    else:
        path = safe_output_path(out_dir, name)
        path = path if path.suffix else path.with_name(path.name + suffix)
    from engine.record.compare import render_compare

    with new_file(path) as fh:
        fh.write(render_compare(comparison, fmt))
    return path
