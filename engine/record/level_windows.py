"""The rate of each window merged into a level's result, read from its recording: how far the
level's own figure spreads (a study's forecasts and its scale-out answers, compare's)."""

from __future__ import annotations

from typing import Any

from engine.events import LevelResult
from engine.record.reader import Recording


def _window_rate(data: dict[str, Any]) -> float:
    stream = data.get("stream")
    if isinstance(stream, dict) and stream.get("output_tokens_per_s") is not None:
        return float(stream["output_tokens_per_s"])
    return float(data.get("throughput_ips") or 0.0)


def level_window_rates(recording: Recording, level: LevelResult | None) -> list[float]:
    """The rate (images/s, a streaming level's output tokens/s) of each window merged into
    ``level``'s result: the spread of that level's figure. [] without a level."""
    if level is None:
        return []
    windows: list[dict[str, Any]] = []
    found: list[float] = []
    for _seq, _ts, kind, data in recording.rows(kinds=("level_started", "window", "level_result")):
        if kind == "level_started":
            windows = []  # a level's windows, or a later trial's
        elif kind == "window" and not data.get("warmup"):
            windows.append(data)
        elif (kind == "level_result" and data.get("index") == level.index and data.get("ts") == level.ts
              and int(data.get("trial") or 1) == level.trial):
            merged = int(data.get("merged_windows") or 0)
            found = [_window_rate(w) for w in windows[-merged:]] if merged else []
    return found
