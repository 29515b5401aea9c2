"""Service-level objectives of a streaming (LLM) sweep, and its goodput: the most a sound level served while meeting them.

``load.slo`` names each objective as ``<figure>_p<percentile>=<bound>``: the figure ``ttft``
(time to the first response), ``itl`` (the gaps between responses) or ``latency`` (to the final
response), the percentile 50, 90, 95 or 99, the bound in ms or s (``ttft_p99=200ms,itl_p99=50ms``).
A level meets them when each named percentile of its merged windows is within its bound; the
goodput is the requests/s and output tokens/s of the highest-throughput stable level that meets
them all (an unstable or failed level decides nothing). An objective on a figure the level could
not measure (ITL where the client read its responses in bursts) is not judged there: neither met
nor missed, and the goodput line says why. Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.analysis.sound import is_sound, output_rate, standing
from engine.events import LatencyStats, LevelResult
from engine.profiles import SLO_PART

FIGURES = ("ttft", "itl", "latency")
PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class Slo:
    figure: str  # "ttft", "itl" or "latency"
    percentile: int
    bound_s: float

    @property
    def name(self) -> str:
        return f"{self.figure}_p{self.percentile}"


def parse_slos(text: str | Sequence[str]) -> tuple[Slo, ...]:
    """``ttft_p99=200ms,itl_p99=50ms`` (or a list of such parts) as objectives; ValueError with
    one line on a bad one."""
    if not isinstance(text, str):
        text = ",".join(str(p) for p in text)
    out: list[Slo] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        match = SLO_PART.match(part.replace(" ", ""))
        if match is None:
            raise ValueError(f"expected <ttft|itl|latency>_p<50|90|95|99>=<number><ms|s>, found {part!r}")
        figure, percentile, number, unit = match.groups()
        bound = float(number) / (1000.0 if unit == "ms" else 1.0)
        if bound <= 0:
            raise ValueError(f"{part!r}: the bound must be above 0")
        if any(s.figure == figure and s.percentile == int(percentile) for s in out):
            raise ValueError(f"{figure}_p{percentile} is named twice")
        out.append(Slo(figure, int(percentile), bound))
    return tuple(out)


def measured(result: LevelResult, slo: Slo) -> float | None:
    """The level's figure the objective bounds (seconds); None where it has none."""
    stats: LatencyStats | None
    if slo.figure == "latency":
        stats = result.latency
    elif result.stream is None:
        return None
    else:
        stats = result.stream.ttft if slo.figure == "ttft" else result.stream.itl
    return getattr(stats, f"p{slo.percentile}", None) if stats is not None else None


def undecided(result: LevelResult, slos: Sequence[Slo]) -> str | None:
    """Why the level's objectives cannot be judged (a figure named that it could not measure);
    None when they can."""
    if result.stream is not None and result.stream.itl_note and any(s.figure == "itl" for s in slos):
        return result.stream.itl_note
    return None


def misses(result: LevelResult, slos: Sequence[Slo]) -> list[str]:
    """The objectives the level does not meet (a figure it lacks is not met; one it could not
    measure is not judged, ``undecided``), by name."""
    out = []
    for slo in slos:
        if slo.figure == "itl" and undecided(result, slos) is not None:
            continue
        value = measured(result, slo)
        if value is None or value > slo.bound_s:
            out.append(slo.name)
    return out


@dataclass(frozen=True)
class Goodput:
    level: LevelResult  # the level it was served at
    requests_per_s: float
    tokens_per_s: float | None  # None: a unary sweep


def goodput(results: Sequence[LevelResult], slos: Sequence[Slo]) -> Goodput | None:
    """The highest-throughput sound level (engine/analysis/answer.py's rule: stable, uncontended,
    standing) meeting every objective; None when none does. Throughput is output tokens/s where
    the levels stream, requests/s otherwise."""
    meeting = [r for r in standing(results) if is_sound(r) and not misses(r, slos) and undecided(r, slos) is None]
    if not slos or not meeting:
        return None
    best = max(meeting, key=lambda r: (output_rate(r), r.throughput_rps))
    return Goodput(best, best.throughput_rps, best.stream.output_tokens_per_s if best.stream else None)


def goodput_line(results: Sequence[LevelResult], slo_text: str | Sequence[str], cost_per_hour: float = 0.0) -> str | None:
    """The goodput in one line, for every surface that shows it; None without objectives."""
    from engine import format as fmt
    from engine.analysis.scaling import cost_per_million_tokens

    try:
        slos = parse_slos(slo_text)
    except ValueError:
        return None  # the profile's check refused it before the run; a doctored recording says nothing
    if not slos:
        return None
    named = ", ".join(f"{s.name} ≤ {fmt.ms(s.bound_s)} ms" for s in slos)
    best = goodput(results, slos)
    unjudged = [(r, why) for r in standing(results) if is_sound(r) and (why := undecided(r, slos))]
    not_judged = ("; not decided at level " + ", ".join(fmt.level(r.mode, r.level) for r, _ in unjudged)
                  + f": {unjudged[0][1]}") if unjudged else ""
    if best is None:
        if unjudged:
            return f"goodput ({named}): not decided" + not_judged
        return f"goodput ({named}): no stable level meets them"
    text = (f"goodput ({named}): {fmt.rate(best.requests_per_s)} req/s"
            + (f", {fmt.rate(best.tokens_per_s)} tok/s" if best.tokens_per_s is not None else "")
            + f" at level {fmt.level(best.level.mode, best.level.level)}")
    cost = cost_per_million_tokens(cost_per_hour, best.tokens_per_s or 0.0)
    if cost is not None:
        text += f", {fmt.money(cost)} per million output tokens at ${cost_per_hour:g}/h"
    return text + not_judged
