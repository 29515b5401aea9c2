"""The one rule behind every headline figure of a sweep: which levels are sound, the best level
(peak), the point at the latency target, the cost per 1000 images there and the answer line.

A level is sound when it was measured to the end and its windows agreed (stable), with the CPU
to itself (not contended), on every endpoint (not degraded), and no later trial of it followed.
Only sound levels decide; a failed level still counts as missing a latency target (the server
failed under that load: that is an answer, not noise). Where no sound level supports a figure,
the answer says "not decided" and why, never a figure drawn from noise.

``AnswerFold`` applies events one at a time (the live screen, the headless printer, replay);
``decide`` is the same rule over a list of level results (reports, compare, the study, gates):
every surface gives the same figures because they all end here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import format as fmt
from engine.analysis.scaling import cost_per_1000, cost_per_million_tokens
from engine.analysis.slo import Measured, Slo, slo_point
from engine.analysis.sound import SOUND_STATUS, is_sound, output_rate, peak, standing
from engine.analysis.stream_slo import Slo as StreamSlo
from engine.analysis.stream_slo import goodput, parse_slos, undecided
from engine.analysis.stream_slo import misses as stream_misses
from engine.events import Event, LevelResult, LevelStarted, ServerReady, SessionStarted
from engine.profiles import scale_out_parts

ANSWER_ROOM = 160  # an answer line's most characters, "answer: " included: one line of a wide terminal


def first_fitting(*lines: str) -> str:
    """The first line that fits ANSWER_ROOM, the fullest first; else the last (the shortest form):
    what a shorter form leaves out stands above the line (details, the report)."""
    return next((line for line in lines if len(line) <= ANSWER_ROOM), lines[-1])


def level_words(mode: str, level: float) -> str:
    return f"rate {fmt.level(mode, level)}" if mode == "rate" else f"concurrency {fmt.level(mode, level)}"


def why_unsound(r: LevelResult) -> str:
    """"concurrency 1 unstable after 3 trials (others took 60 % of the CPU)": what a level that
    decides nothing was, in words."""
    trials = f" after {r.trial} trials" if r.trial > 1 else ""
    status: str = r.status
    if r.status == SOUND_STATUS and not r.requests:
        status = "completed no request"
    if r.remeasure:
        status = f"measured again ({r.remeasure})"
    elif r.degraded:
        status = f"degraded ({r.degraded})"
    load = []
    if r.others_cpu is not None and r.others_cpu >= 0.05:
        load.append(f"others took {r.others_cpu * 100:.0f} % of the CPU")
    if r.steal is not None and r.steal >= 0.05:
        load.append(f"{r.steal * 100:.0f} % stolen")
    extra = f" ({', '.join(load)})" if load else ""
    return f"{level_words(r.mode, r.level)} {status}{trials}{extra}"


def _unsound_kind(r: LevelResult) -> str:
    if r.remeasure:
        return "measured again"
    if r.degraded:
        return "degraded"
    if r.status == SOUND_STATUS and not r.requests:
        return "empty"
    return str(r.status)


def _span(values: list[float]) -> str:
    lo, hi = round(min(values) * 100), round(max(values) * 100)
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def unsound_summary(unsound: Sequence[LevelResult], total: int, load: bool = True, short: bool = False) -> str:
    """"7 of 7 levels contended (others 77–85 % of the CPU)": the levels that decide nothing in a
    few words, for the answer line (each one's own reason is ``why_unsound``). ``short``: levels
    of several kinds are not counted by kind ("4 of 12 levels not sound")."""
    kinds = Counter(_unsound_kind(r) for r in unsound)
    head = f"{len(unsound)} of {total} level{'s' if total != 1 else ''}"
    inside = []
    if len(kinds) == 1:
        head += f" {next(iter(kinds))}"
    else:
        head += " not sound"
        if not short:
            inside.append(", ".join(f"{n} {kind}" for kind, n in kinds.most_common()))
    others = [r.others_cpu for r in unsound if r.others_cpu is not None and r.others_cpu >= 0.05]
    steal = [r.steal for r in unsound if r.steal is not None and r.steal >= 0.05]
    if load and others:
        inside.append(f"others {_span(others)} % of the CPU")
    if load and steal:
        inside.append(f"{_span(steal)} % stolen")
    return head + (f" ({'; '.join(inside)})" if inside else "")


def _advice(unsound: Sequence[LevelResult]) -> str:
    """What to do about noisy levels, in a few words (the full advice is AGAIN)."""
    busy = any(r.status == "contended" or (r.others_cpu or 0) >= 0.05 or (r.steal or 0) >= 0.05 for r in unsound)
    return "measure on a quieter box" if busy else "measure with more windows or trials"


WORDS_NOTE = ("tokens marked w are words, not tokens: the server reported no usage (its own token counts); "
              "$/Mtok on them is per million words")
AGAIN = "measure again on a quieter box, or with more windows (load.max_windows) or trials (load.max_trials)"


@dataclass(frozen=True)
class Answer:
    """A sweep's headline figures, from its sound levels only."""

    levels: tuple[LevelResult, ...]  # the standing result of each level, by level
    sound: tuple[LevelResult, ...]
    best: LevelResult | None  # the sound level with the most throughput (the lower on a tie)
    slo: Slo | None
    slo_level: LevelResult | None  # the sound level with the most throughput within the target
    slo_bounded: bool  # a sound (or failed) level above it missed the target
    cost_per_hour: float | None
    gpus: int  # GPUs in the config (0: CPU)
    remeasured: int  # levels measured more than once
    not_decided: str  # "" or why no sound level supports the answer, every level named
    running: bool = False  # levels are still to come
    # a streaming sweep's objectives (load.slo: TTFT, ITL, latency percentiles): with them and no
    # latency target, slo_level is the goodput's level (the most served meeting them all)
    stream_slos: tuple[StreamSlo, ...] = ()
    brief: str = ""  # not_decided in a few words, for the answer line
    cause: str = ""  # not_decided's kind: "no sound level", "no level meets p99 <= 50 ms"
    traffic: str = ""  # the synthetic traffic's shape the cache figure holds for: "4 groups x 1,024-word prefix"

    @property
    def targeted(self) -> bool:
        """A latency target or streaming objectives decide (the SLO point), not the peak."""
        return self.slo is not None or bool(self.stream_slos)

    @property
    def target_words(self) -> str:
        """"p99 <= 50 ms", "ttft_p99 <= 200 ms, itl_p99 <= 50 ms"; "" without a target."""
        if self.slo is not None:
            return f"{self.slo.percentile} <= {self.slo.target_s * 1000:g} ms"
        return ", ".join(f"{s.name} <= {s.bound_s * 1000:g} ms" for s in self.stream_slos)

    @property
    def deciding(self) -> LevelResult | None:
        """The level the answer rests on: the SLO point with a target, else the peak."""
        return self.slo_level if self.targeted else self.best

    @property
    def streaming(self) -> bool:
        """A streaming model's sweep: its figures are output tokens, not images."""
        return any(r.stream is not None for r in self.levels)

    @property
    def cost_per_1000(self) -> float | None:
        """$ per 1000 images at the deciding level (None for a streaming sweep: see cost_per_million_tokens)."""
        d = self.deciding
        if d is None or not self.cost_per_hour or d.stream is not None:
            return None
        return cost_per_1000(self.cost_per_hour, d.throughput_ips)

    @property
    def tokens_per_s(self) -> float | None:
        """A streaming sweep's output tokens/s at the deciding level."""
        d = self.deciding
        return d.stream.output_tokens_per_s if d is not None and d.stream is not None else None

    @property
    def cost_per_million_tokens(self) -> float | None:
        """$ per million output tokens at the deciding level (a priced streaming sweep)."""
        rate = self.tokens_per_s
        return cost_per_million_tokens(self.cost_per_hour or 0.0, rate) if rate is not None else None

    @property
    def left_out(self) -> list[str]:
        """The levels that decide nothing, in words (failed ones are results, not noise)."""
        return [why_unsound(r) for r in self.levels if not is_sound(r) and r.status != "failed"]

    @property
    def details(self) -> list[str]:
        """The lines that stand above the answer line: each level left out, and why."""
        left = [f"left out: {why}" for why in self.left_out]
        if any(r.stream is not None and r.stream.tokens_are_words for r in self.levels):
            left.append(WORDS_NOTE)
        return [*left, AGAIN] if self.left_out and self.not_decided else left

    @property
    def line(self) -> str:
        """The one line that answers the run: "answer: ...", short (``details`` holds each level's
        reason)."""
        if self.not_decided:  # the fullest that fits; each level's reason stands above it (details)
            return first_fitting(f"answer: not decided: {self.brief or self.not_decided}",
                                 f"answer: not decided: {self.cause or self.not_decided}")
        d = self.deciding
        assert d is not None
        where = f"at {self.target_words}" if self.targeted else "peak"
        box = f"{self.gpus} GPU{'s' if self.gpus != 1 else ''}" if self.gpus else "CPU"
        shape = ""
        if d.cache is not None and d.cache.hit_rate is not None:  # the traffic the figure holds for
            box += f", {fmt.percent(d.cache.hit_rate)} prefix cache hits"
            shape = f" ({self.traffic})" if self.traffic else ""
        if d.stream is not None:
            unit = "words/s (not tokens)" if d.stream.tokens_are_words else "tokens/s"
            figure = f"{fmt.rate(d.stream.output_tokens_per_s)} {unit} at {level_words(d.mode, d.level)}"
        else:
            figure = f"{fmt.rate(d.throughput_ips)} images/s at {level_words(d.mode, d.level)}"
        qualifiers = ("", "")
        if not self.targeted:
            ttft = f", TTFT p99 {fmt.ms(d.stream.ttft.p99)} ms" if d.stream is not None else ""
            qualifiers = (f" (p99 {fmt.ms(d.latency.p99)} ms{ttft})",) * 2
        elif not self.slo_bounded:
            qualifiers = (" (no level missed the target: the point may lie higher)", " (the point may lie higher)")
        costs = []
        if self.cost_per_1000 is not None:
            costs.append(f"{fmt.money(self.cost_per_1000)} per 1000")
        if self.cost_per_million_tokens is not None:
            costs.append(f"{fmt.money(self.cost_per_million_tokens)} per million output tokens")
        again = f"{self.remeasured} level{'s' if self.remeasured != 1 else ''} re-measured"
        unsound = [r for r in self.levels if not is_sound(r) and r.status != "failed"]
        so_far = "; so far" if self.running else ""

        def line(qualifier: str, short: bool, count: bool = True, left_out: bool = True, traffic: str = "") -> str:
            left = (f"{unsound_summary(unsound, len(self.levels), load=False, short=short)}, left out"
                    if unsound and left_out else "")
            inside = "; ".join(x for x in (again if count else "", left) if x)
            tail = f"stable ({inside})" if inside else "stable"
            return f"answer: {where}, {box}{traffic}: {', '.join([figure + qualifier, *costs])}, {tail}{so_far}"

        # the fullest line that fits: each level left out stands above it, with its reason; the
        # traffic's shape goes before the re-measure count, after the latency
        return first_fitting(line(qualifiers[0], False, traffic=shape), line(qualifiers[0], True, traffic=shape),
                             line(qualifiers[1], True, traffic=shape), line(qualifiers[1], True, count=False, traffic=shape),
                             line(qualifiers[0], False), line(qualifiers[0], True), line(qualifiers[1], True),
                             line(qualifiers[1], True, count=False), line(qualifiers[1], True, False, False),
                             line("", True, False, False))


def slo_measured(results: Iterable[LevelResult], slo: Slo) -> list[Measured]:
    """The levels the latency target is judged on: the sound ones, and the failed ones as
    misses; a level that is not sound is left out (noise neither meets nor misses a target)."""
    return [Measured(float(r.level), getattr(r.latency, slo.percentile) if r.status != "failed" and r.requests
                     else None, output_rate(r))
            for r in standing(results) if is_sound(r) or r.status == "failed"]


def decide(results: Iterable[LevelResult], slo: Slo | None = None, cost_per_hour: float | None = None,
           gpus: int = 0, running: bool = False, stream_slos: Sequence[StreamSlo] = (), traffic: str = "") -> Answer:
    """The answer over one sweep's level results (every trial may be passed: the last of each
    level stands). ``stream_slos``: a streaming sweep's objectives (load.slo), which decide the
    SLO point where there is no latency target ``slo``."""
    every = list(results)
    levels = standing(every)
    trials: dict[tuple[int, float], int] = {}
    for r in every:
        key = (r.index, float(r.level))
        trials[key] = max(trials.get(key, 1), r.trial)
    sound = [r for r in levels if is_sound(r)]
    best = peak(levels)
    slo_level, bounded = None, False
    if slo is not None:
        point = slo_point(slo_measured(levels, slo), slo.target_s)
        bounded = point.bounded
        slo_level = next((r for r in sound if point.level is not None and r.level == point.level), None)
    elif stream_slos:
        good = goodput(levels, stream_slos)
        slo_level = good.level if good is not None else None
        bounded = any(stream_misses(r, stream_slos) for r in levels
                      if (is_sound(r) or r.status == "failed") and slo_level is not None and r.level > slo_level.level)
    full, cause, brief = _not_decided(levels, sound, best, slo, slo_level, running, tuple(stream_slos))
    return Answer(levels=tuple(levels), sound=tuple(sound), best=best, slo=slo, slo_level=slo_level,
                  slo_bounded=bounded, cost_per_hour=cost_per_hour, gpus=gpus,
                  remeasured=sum(1 for n in trials.values() if n > 1), not_decided=full,
                  running=running, stream_slos=tuple(stream_slos), brief=brief, cause=cause, traffic=traffic)


def _not_decided(levels: Sequence[LevelResult], sound: Sequence[LevelResult], best: LevelResult | None,
                 slo: Slo | None, slo_level: LevelResult | None, running: bool,
                 stream_slos: tuple[StreamSlo, ...] = ()) -> tuple[str, str, str]:
    """Why nothing is decided: in full, its kind, and in a few words; ("", "", "") when decided."""
    if not levels:
        text = "no level measured yet" if running else "no level was measured"
        return text, text, text
    unsound = [r for r in levels if not is_sound(r) and r.status != "failed"]
    noisy = [why_unsound(r) for r in unsound]
    if best is None:
        if not noisy:
            return "every level failed", "every level failed", "every level failed"
        return (f"no sound level: {'; '.join(noisy)}; {AGAIN}", "no sound level",
                _brief(*(f"{unsound_summary(unsound, len(levels), short=short)}; {_advice(unsound)}"
                         for short in (False, True))))
    if slo is not None and slo_level is None:
        target = f"{slo.percentile} <= {slo.target_s * 1000:g} ms"
        below = [r for r in unsound if r.level < min(s.level for s in sound)]
        if below:
            return (f"no sound level meets {target}, and the levels that could have are not sound: "
                    f"{'; '.join(why_unsound(r) for r in below)}; {AGAIN}", f"no sound level meets {target}",
                    _brief(*(f"no sound level meets {target}; below the sound ones "
                             f"{unsound_summary(below, len(levels), short=short)}; {_advice(below)}"
                             for short in (False, True)), f"no sound level meets {target}; {_advice(below)}"))
        text = f"no level meets {target} (the least load measured, {level_words(levels[0].mode, levels[0].level)}, misses it)"
        return text, f"no level meets {target}", text
    if slo is None and stream_slos and slo_level is None:
        target = ", ".join(f"{s.name} <= {s.bound_s * 1000:g} ms" for s in stream_slos)
        unjudged = [(r, why) for r in sound if (why := undecided(r, stream_slos))]
        if unjudged:  # a figure those levels could not measure: not judged, so not missed either
            text = (f"{target} not decided at {', '.join(level_words(r.mode, r.level) for r, _ in unjudged)}: "
                    f"{unjudged[0][1]}")
            return text, f"{target} not decided", _brief(text, f"{target} not decided at {len(unjudged)} "
                                                          f"level{'s' if len(unjudged) != 1 else ''}")
        cause = f"no sound level meets {target}"
        return (cause + (f" (left out: {'; '.join(noisy)})" if noisy else ""), cause,
                _brief(*(cause + (f" ({unsound_summary(unsound, len(levels), load=False, short=short)}, left out)"
                                  if unsound else "") for short in (False, True)), cause))
    return "", "", ""


def _brief(*forms: str) -> str:
    """The fullest of a not-decided reason's forms whose answer line fits ANSWER_ROOM."""
    head = "answer: not decided: "
    return first_fitting(*(head + form for form in forms)).removeprefix(head)


# --------------------------------------------------------------------------- the fold over events


def gpus_in_variant(variant: str, gpu_count: int) -> int | None:
    """"4x" -> 4, "1x*4" (4 servers of one GPU each) -> 4, "tp2" / "1*2" (study --serve) -> 2. Without an "Nx" variant: the box's
    GPU count, or None on a CPU-only run."""
    parts = scale_out_parts(variant)
    if parts is not None:
        return parts[1] if parts[0] in ("1x", "tp1") else (gpu_count if gpu_count > 0 else None)
    if variant.endswith("x") and variant[:-1].isdigit() and int(variant[:-1]) > 0:
        return int(variant[:-1])
    if variant.startswith("tp") and variant[2:].isdigit() and int(variant[2:]) > 0:  # a served LLM's TP size
        return int(variant[2:])
    return gpu_count if gpu_count > 0 else None


def profile_stream_slos(profile: dict[str, Any]) -> tuple[StreamSlo, ...]:
    """A recorded profile's load.slo as objectives; () where it has none (or a doctored one)."""
    load = profile.get("load")
    text = load.get("slo") if isinstance(load, dict) else None
    if not isinstance(text, (str, list)):
        return ()
    try:
        return parse_slos(text)
    except ValueError:
        return ()


def traffic_words(profile: dict[str, Any]) -> str:
    """The synthetic traffic's shape a cache figure holds for, from the profile's load section:
    "4 groups x 1,024-word prefix" (and "4-turn sessions"); "" where the prompts share nothing
    by construction (a file's prompts, or distinct synthetic ones)."""
    load: dict[str, Any] = profile["load"] if isinstance(profile.get("load"), dict) else {}
    groups, words, turns = (_profile_number(profile, "load", k) or 0 for k in ("prefix_groups", "prefix_tokens", "turns"))
    parts = []
    if groups and words and not load.get("input_data"):
        parts.append(f"{int(groups):,} group{'s' if groups != 1 else ''} x {int(words):,}-word prefix")
    if turns > 1:
        parts.append(f"{int(turns)}-turn sessions")
    return ", ".join(parts)


def _profile_number(profile: dict[str, Any], section: str, key: str) -> float | None:
    value = (profile.get(section) or {}).get(key) if isinstance(profile.get(section), dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass
class AnswerFold:
    """``decide`` applied as events arrive: a new sweep (level index 0, first trial) starts over,
    as every report takes one sweep's levels. ``slo``, ``cost_per_hour`` and ``gpus`` default to
    the session's profile (hardware.cost_per_hour, hardware.gpu_count)."""

    slo: Slo | None = None
    cost_per_hour: float | None = None
    gpus: int | None = None
    results: list[LevelResult] = field(default_factory=list)
    finished: bool = False
    stream_slos: tuple[StreamSlo, ...] | None = None  # None: the profile's load.slo
    _profile_stream_slos: tuple[StreamSlo, ...] = ()
    _profile_cost: float | None = None
    _profile_gpus: int = 0
    _variant_gpus: int = 0
    _traffic: str = ""

    def apply(self, event: Event) -> None:
        if isinstance(event, SessionStarted):
            self._traffic = traffic_words(event.profile)
            self._profile_cost = _profile_number(event.profile, "hardware", "cost_per_hour")
            self._profile_gpus = int(_profile_number(event.profile, "hardware", "gpu_count") or 0)
            self._profile_stream_slos = profile_stream_slos(event.profile)
            variant = (event.profile.get("model") or {}).get("variant") if isinstance(event.profile.get("model"), dict) else None
            if isinstance(variant, str):
                self._variant_gpus = gpus_in_variant(variant, self._profile_gpus) or 0
        elif isinstance(event, ServerReady):
            if event.config_variant:
                self._variant_gpus = gpus_in_variant(event.config_variant, self._profile_gpus) or 0
        elif isinstance(event, LevelStarted):
            if event.index == 0 and event.trial <= 1:
                self.results = []
                self.finished = False
        elif isinstance(event, LevelResult):
            self.results.append(event)
        elif event.kind in ("sweep_finished", "session_ended"):
            self.finished = True

    def reset(self) -> None:
        self.results = []
        self.finished = False

    def answer(self) -> Answer:
        cost = self.cost_per_hour if self.cost_per_hour is not None else self._profile_cost
        gpus = self.gpus if self.gpus is not None else self._variant_gpus
        slos = self.stream_slos if self.stream_slos is not None else self._profile_stream_slos
        return decide(self.results, self.slo, cost, gpus, running=not self.finished, stream_slos=slos,
                      traffic=self._traffic)


def answer_of(events: Iterable[Event], slo: Slo | None = None, cost_per_hour: float | None = None,
              gpus: int | None = None) -> Answer:
    fold = AnswerFold(slo=slo, cost_per_hour=cost_per_hour, gpus=gpus)
    for event in events:
        fold.apply(event)
    return fold.answer()
