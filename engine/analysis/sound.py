"""What makes a level sound, the one test every decision applies (engine/analysis/answer.py), with
the standing result of each level, what a level served and the peak. A leaf: the answer, the
streaming goodput (engine/analysis/stream_slo.py) and the wire check all read it."""

from __future__ import annotations

from collections.abc import Iterable

from engine.events import LevelResult

SOUND_STATUS = "stable"


def is_sound(r: LevelResult) -> bool:
    """Stable, uncontended, measured to the end with requests completed over every server (not
    degraded), and standing (no later trial of the level follows it)."""
    return r.status == SOUND_STATUS and r.requests > 0 and not r.remeasure and not r.degraded


def output_rate(r: LevelResult) -> float:
    """What a level served: output tokens/s for a streaming model (a stream of responses per
    request), images/s otherwise. The peak is the sound level with the most of it."""
    return r.stream.output_tokens_per_s if r.stream is not None else r.throughput_ips


def peak(results: Iterable[LevelResult]) -> LevelResult | None:
    """The peak: the sound standing level that served the most (the lower level on a tie)."""
    return max((r for r in standing(results) if is_sound(r)), key=lambda r: (output_rate(r), -r.level), default=None)


def standing(results: Iterable[LevelResult]) -> list[LevelResult]:
    """The last published result of each level, ordered by level (a later trial, with the same
    index and level, replaces an earlier one)."""
    by_index: dict[tuple[int, float], LevelResult] = {}
    for r in results:
        by_index[(r.index, float(r.level))] = r
    return sorted(by_index.values(), key=lambda r: (r.level, r.index))
