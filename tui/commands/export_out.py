"""`export --out`: a folder (one file per format), where `compare --out` is a file. A name that
reads as a file (report.md) is refused in one line instead of becoming a folder of that name."""

from __future__ import annotations

from pathlib import Path

from engine.errors import UserError

FILE_SUFFIXES = (".md", ".html", ".htm", ".csv", ".json", ".txt")


def check_out_folder(out: Path | None) -> None:
    if out is None or out.is_dir():
        return
    if out.exists():
        raise UserError(f"--out {out}: is a file; export writes one file per format into a folder (e.g. --out reports/)")
    if out.suffix.lower() in FILE_SUFFIXES:
        raise UserError(f"--out {out}: export writes one file per format into a folder, named after the recording; "
                        f"give a folder (e.g. --out {out.with_suffix('')}/)")
