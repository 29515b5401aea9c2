"""Pass/fail gates for CI: thresholds from the profile ([gates]) or the command line, checked
against recorded results. A gate is judged on sound levels only (engine/analysis/answer.py): a
level that failed fails its gate (the server failed under that load); a gate that cannot be
judged (its level not measured or not sound, no sound level at all, no efficiency without a 1x
base) is ``Unjudged``: exit 2 with the reason, never a pass and never read as a failed gate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from engine.analysis.answer import decide, is_sound, standing, why_unsound
from engine.errors import UserError
from engine.events import LevelResult
from engine.profiles import Gates

GATE_FAILURE_EXIT_CODE = 3  # distinct from 1 (run failed) and 2 (bad input)
GATE_UNJUDGED_EXIT_CODE = 2  # a gate that cannot be judged: as bad input, the run cannot answer it
_LEVEL_MATCH = 1e-9


class Unjudged(str):
    """A gate line that says why the gate could not be judged (not that it failed)."""

    __slots__ = ()


def gate_exit_code(failures: Sequence[str]) -> int:
    """0 when every gate passed; 3 when one failed; 2 when none failed but one could not be judged."""
    if any(not isinstance(f, Unjudged) for f in failures):
        return GATE_FAILURE_EXIT_CODE
    return GATE_UNJUDGED_EXIT_CODE if failures else 0


def gate_word(failure: str) -> str:
    """"gate not judged" or "gate failed", for the line that prints it."""
    return "gate not judged" if isinstance(failure, Unjudged) else "gate failed"


def _level_key(key: str) -> float:
    try:
        level = float(key)
    except (TypeError, ValueError):
        raise UserError(f"gates.max_p99_ms: level {key!r} is not a number (expected e.g. \"64\" = 250)") from None
    if level <= 0:
        raise UserError(f"gates.max_p99_ms: level {key!r} must be > 0")
    return level


def evaluate_gates(gates: Gates, levels: Sequence[LevelResult], efficiency: float | None = None) -> list[str]:
    """One line per failed gate; an empty list means every gate passed (or none was set).

    ``levels``: the sweep's LevelResults. ``efficiency``: the scaling efficiency to gate (compare
    mode: the lowest of the multi-GPU runs against their 1x base), None when there is none.
    """
    failures: list[str] = []
    levels = standing(levels)  # a level measured again: its last trial
    usable = [r for r in levels if r.status != "failed" and r.requests > 0]

    if gates.min_throughput is not None:
        best = decide(levels).best
        if not usable:
            failures.append(f"min_throughput {gates.min_throughput:g}/s: no level produced a result")
        elif best is None:
            failures.append(Unjudged(f"min_throughput {gates.min_throughput:g}/s: not decided: "
                                     f"{decide(levels).not_decided}"))
        else:
            if best.throughput_ips < gates.min_throughput:
                failures.append(
                    f"min_throughput: best {best.throughput_ips:.4g}/s (at {best.level:g}) "
                    f"< {gates.min_throughput:g}/s"
                )

    for key, limit_ms in sorted(gates.max_p99_ms.items(), key=lambda kv: _level_key(kv[0])):
        level = _level_key(key)
        match = [r for r in levels if abs(float(r.level) - level) <= _LEVEL_MATCH]
        if not match:
            failures.append(Unjudged(f"max_p99_ms at {level:g}: level {level:g} was not measured"))
            continue
        result = match[-1]
        p99 = result.latency.p99
        if result.status == "failed" or result.requests <= 0 or p99 is None:
            failures.append(f"max_p99_ms at {level:g}: the level {result.status} without a p99 latency")
        elif not is_sound(result):
            failures.append(Unjudged(f"max_p99_ms at {level:g}: not decided: {why_unsound(result)}"))
        elif p99 * 1000.0 > limit_ms:
            failures.append(f"max_p99_ms at {level:g}: p99 {p99 * 1000.0:.4g} ms > {limit_ms:g} ms")

    if gates.min_efficiency is not None:
        if efficiency is None:
            failures.append(Unjudged(
                f"min_efficiency {gates.min_efficiency:g}: no scaling efficiency to check "
                "(needs a 1x base run with a sound level: compare the recordings)"
            ))
        elif efficiency < gates.min_efficiency:
            failures.append(f"min_efficiency: {efficiency:.3f} < {gates.min_efficiency:g}")
    return failures


def evaluate_comparison_gates(gates: Gates, comparison: Any) -> list[str]:
    """Gates over a comparison (engine.record.compare.Comparison, read by duck typing so that
    analysis stays independent of the recording layer): the throughput and p99 gates apply to
    every run, min_efficiency to every multi-GPU run against its 1x base. Failures name the run."""
    failures: list[str] = []
    per_run = replace(gates, min_efficiency=None)
    for run in comparison.runs:
        levels = [lv.result for lv in run.findings.levels]  # the compared sweep's, never a mix
        failures += [_named(run.label, f) for f in evaluate_gates(per_run, levels)]
    if gates.min_efficiency is not None:
        multi = [r for r in comparison.runs if r.n and r.n > 1]
        if not multi:
            failures.append(Unjudged(f"min_efficiency {gates.min_efficiency:g}: no multi-GPU run to check"))
        only_efficiency = Gates(min_efficiency=gates.min_efficiency)
        for r in multi:
            efficiency = r.scaling.efficiency if r.scaling is not None else None
            failures += [_named(r.label, f) for f in evaluate_gates(only_efficiency, [], efficiency)]
    return failures


def _named(label: str, failure: str) -> str:
    """The failure line with the run's name in front; still Unjudged when it was."""
    line = f"{label}: {failure}"
    return Unjudged(line) if isinstance(failure, Unjudged) else line


def describe_gates(gates: Gates) -> list[str]:
    """Each gate that is set, in words (for a report); [] when none is."""
    out = []
    if gates.min_throughput is not None:
        out.append(f"min_throughput {gates.min_throughput:g} images/s at the best level")
    out += [f"p99 at level {level} <= {limit:g} ms" for level, limit in sorted(gates.max_p99_ms.items(),
                                                                               key=lambda kv: float(kv[0]))]
    if gates.min_efficiency is not None:
        out.append(f"min_efficiency {gates.min_efficiency:g}")
    return out


def parse_p99_gates(specs: Iterable[str]) -> dict[str, float]:
    """Command-line p99 gates: "64=250" or "64:250" (level = milliseconds)."""
    out: dict[str, float] = {}
    for spec in specs:
        sep = "=" if "=" in spec else ":"
        level, _, ms = spec.partition(sep)
        try:
            limit = float(ms)
        except ValueError:
            raise UserError(f"p99 gate {spec!r}: expected LEVEL=MILLISECONDS, e.g. 64=250") from None
        if not math.isfinite(limit) or limit <= 0:  # nan passes "<= 0" and then no gate can fail
            raise UserError(f"p99 gate {spec!r}: the limit must be a finite number > 0 ms")
        out[f"{_level_key(level.strip()):g}"] = limit
    return out


def merge_gates(
    base: Gates, *, min_throughput: float | None = None, max_p99_ms: dict[str, float] | None = None,
    min_efficiency: float | None = None,
) -> Gates:
    """The profile's gates with command-line values on top (a p99 level given on the command
    line replaces the profile's limit for that level)."""
    for name, value in (("min_throughput", min_throughput), ("min_efficiency", min_efficiency)):
        if value is not None and value <= 0:
            raise UserError(f"gate {name}: expected a number > 0, found {value!r}")
    p99 = {f"{_level_key(k):g}": v for k, v in base.max_p99_ms.items()}
    p99.update({f"{_level_key(k):g}": v for k, v in (max_p99_ms or {}).items()})
    return replace(
        base,
        min_throughput=min_throughput if min_throughput is not None else base.min_throughput,
        min_efficiency=min_efficiency if min_efficiency is not None else base.min_efficiency,
        max_p99_ms=p99,
    )
