"""The study index: one small JSON file that names a study's per-variant recordings.

Why one recording per variant plus an index, not one recording: each variant is an ordinary
session (its own server start, its own recording), so replay, export and compare work on a
variant unchanged; a variant's recording is closed and complete before the next variant starts,
so an interrupted study loses nothing it finished; and the index is rewritten atomically after
every variant, so it always says which variants are done and which are missing.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from engine.errors import UserError
from engine.events import SessionStatus

INDEX_SUFFIX = ".study.json"
INDEX_KIND = "gpuscale-tui study"
INDEX_VERSION = 1
# as engine/study/variants.py and engine/study/serve_configs.py accept them
VARIANT_NAME = re.compile(r"^(\d+x|cpu\d*|1x\*[1-9]\d*|cpu\d*\*[1-9]\d*|tp[1-9]\d*|1\*[1-9]\d*)$")


@dataclass
class VariantRun:
    variant: str
    recording: str | None  # relative to the index's folder
    status: SessionStatus  # the session's
    exit_code: int
    error: str | None = None
    how: str = ""  # how the config was put in place


@dataclass
class StudyIndex:
    study_id: str
    profile: str
    model: str
    variants: list[str]
    server: str
    slo: str | None = None
    search_steps: int = 0
    costs: dict[str, float] = field(default_factory=dict)  # GPUs -> $/hr given on the command line
    # a one-GPU box's $/hr for the scale-out configs (from --scale-out-profile), and where from
    scale_out_price: float | None = None
    scale_out_price_from: str = ""
    serve: str = ""  # the LLM serving study's --serve command (key-like values masked); "": a Triton study
    started: float = 0.0
    ended: float | None = None
    status: SessionStatus | Literal["running"] = "running"
    runs: list[VariantRun] = field(default_factory=list)
    kind: str = INDEX_KIND
    version: int = INDEX_VERSION

    @property
    def finished(self) -> list[str]:
        return [r.variant for r in self.runs if r.recording and r.status in ("ok", "failed")]

    @property
    def missing(self) -> list[str]:
        done = set(self.finished)
        return [v for v in self.variants if v not in done]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["missing"] = self.missing  # for a person reading the file; recomputed on load
        return data


def is_index(path: Path) -> bool:
    return str(path).endswith(INDEX_SUFFIX)


def write_index(index: StudyIndex, path: Path) -> None:
    """Atomically: a reader never sees half a file, a crash leaves the previous version."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(index.to_dict(), indent=2) + "\n")
    os.replace(tmp, path)


def read_index(path: Path) -> StudyIndex:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such study index") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a readable study index ({exc.__class__.__name__})") from None
    if not isinstance(data, dict) or data.get("kind") != INDEX_KIND:
        raise UserError(f"{path}: not a gpuscale-tui study index")
    if not isinstance(data.get("version"), int) or data["version"] > INDEX_VERSION:
        raise UserError(f"{path}: study index version {data.get('version')!r} is newer than this tool's")
    try:
        runs = [VariantRun(**r) for r in data.get("runs", [])]
        fields = {k: v for k, v in data.items() if k not in ("runs", "missing")}
        index = StudyIndex(**fields, runs=runs)
    except TypeError as exc:
        raise UserError(f"{path}: malformed study index ({exc})") from None
    # costs: GPU count -> $/hr, read as numbers by the study's figures and by compare
    costs = index.costs if isinstance(index.costs, dict) else None
    try:
        valid = costs is not None and all(int(k) > 0 and float(v) > 0 for k, v in costs.items())
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise UserError(f"{path}: malformed study index (costs: expected GPU count -> $/hr, found {index.costs!r})")
    problem = _index_problem(index)
    if problem:
        raise UserError(f"{path}: malformed study index ({problem})")
    return index


def _index_problem(index: StudyIndex) -> str | None:
    """What makes a parsed index unusable by its readers (export, compare, replay), or None."""
    if not isinstance(index.variants, list) or not all(isinstance(v, str) for v in index.variants):
        return f"variants: expected a list of names, found {index.variants!r:.80}"
    for run in index.runs:
        if not isinstance(run.variant, str) or not VARIANT_NAME.match(run.variant):
            return f"unknown variant {run.variant!r:.40} (expected Nx, cpu, cpuK, 1x*N, cpu*N, tpN or 1*N)"
        if run.recording is not None and (not isinstance(run.recording, str) or not run.recording
                                          or Path(run.recording).is_absolute() or ".." in Path(run.recording).parts):
            return f"variant {run.variant}: recording {run.recording!r:.80} is not a file name beside the index"
        if not isinstance(run.status, str) or not isinstance(run.exit_code, int) or isinstance(run.exit_code, bool):
            return f"variant {run.variant}: status and exit_code of the wrong type"
        if not isinstance(run.how, str) or (run.error is not None and not isinstance(run.error, str)):
            return f"variant {run.variant}: error of the wrong type"
    price = index.scale_out_price
    if price is not None and (isinstance(price, bool) or not isinstance(price, (int, float))
                              or not math.isfinite(price) or price <= 0):
        return f"scale_out_price: expected $/hr > 0, found {price!r:.40}"
    if not isinstance(index.scale_out_price_from, str):
        return f"scale_out_price_from: expected text, found {index.scale_out_price_from!r:.40}"
    if not isinstance(index.serve, str):
        return f"serve: expected text, found {index.serve!r:.40}"
    if index.slo is not None and not isinstance(index.slo, str):
        return f"slo: expected text, found {index.slo!r:.40}"
    if isinstance(index.search_steps, bool) or not isinstance(index.search_steps, int):
        return f"search_steps: expected a whole number, found {index.search_steps!r:.40}"
    for key in ("started", "ended"):
        value = getattr(index, key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            return f"{key}: expected a time, found {value!r:.40}"
    for key in ("study_id", "profile", "model", "server", "status"):
        if not isinstance(getattr(index, key), str):
            return f"{key}: expected text, found {getattr(index, key)!r:.40}"
    return None


def recording_paths(index: StudyIndex, index_path: Path) -> list[tuple[str, Path]]:
    """(variant, recording path) of every variant that left a recording, in study order."""
    base = Path(index_path).parent
    return [(r.variant, base / r.recording) for r in index.runs if r.recording]
