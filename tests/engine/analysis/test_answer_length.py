"""One answer line of at most 160 characters (issue 54): every line the sweep's rule
(engine/analysis/answer.py), the study's (engine/study/figures.py answer_line) and the request
path's cap (engine/analysis/request_path_cap.py) can give, over representative inputs made long
on purpose (big figures, every kind of unsound level, targets, costs, a live sweep), fits; what
a shorter form leaves out stands above it (the levels left out, the stop line, the report)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest

from engine import events as ev
from engine.analysis.answer import ANSWER_ROOM, Answer, decide
from engine.analysis.request_path_cap import (
    BOUNDS,
    CLIENT,
    HOST_CPU,
    OUTSIDE,
    WIRE,
    PeakEvidence,
    request_path_cap,
)
from engine.analysis.slo import parse_slo
from engine.analysis.stream_slo import parse_slos
from engine.analysis.study import StopAt
from engine.study.figures import answer_line
from tests.structs import replace


def _level(level: float, ips: float, p99_ms: float, status: str = "stable", trial: int = 3, **kw: object) -> ev.LevelResult:
    lat = ev.LatencyStats(count=100, mean=p99_ms / 2000, p50=p99_ms / 2000, p95=p99_ms / 1200, p99=p99_ms / 1000)
    return ev.LevelResult(mode="concurrency", level=level, index=int(level), status=status, batch_size=1, windows=3,
                          merged_windows=3, requests=100, errors=0, throughput_rps=ips, throughput_ips=ips,
                          latency=lat, trial=trial, **kw)  # type: ignore[arg-type]


def _stream(r: ev.LevelResult) -> ev.LevelResult:
    stream = ev.StreamStats(ttft=ev.LatencyStats(count=10, p99=0.25), itl=ev.LatencyStats(count=70, p99=0.01),
                            responses_per_request=8, output_tokens_per_s=r.throughput_ips * 37)
    return replace(r, stream=stream)


STABLE = [_level(2 ** i, 100_000 + 23_456.7 * i, 10 + 40 * i) for i in range(12)]  # concurrency 1 to 2048
MIXED = [  # every kind of level that decides nothing, below stable ones
    _level(1, 40, 9, "contended", others_cpu=0.61, steal=0.12), _level(2, 80, 9, "unstable"),
    replace(_level(4, 160, 9), remeasure="throughput fell 31 % below concurrency 2"),
    replace(_level(8, 320, 9), degraded="1 of 4 endpoints stopped answering"),
    replace(_level(16, 640, 9), requests=0), *STABLE[5:],
]
NOISY = [replace(r, status="contended" if i % 2 else "unstable", others_cpu=0.83, steal=0.31)
         for i, r in enumerate(STABLE)]
SWEEPS = {"stable": STABLE, "mixed": MIXED, "noisy": NOISY,
          "failed top": [*STABLE[:-1], replace(STABLE[-1], status="failed")]}
TARGETS = [None, "p99=50ms", "p99=99999ms", "p99=1ms"]  # decided, met by all, met by none


def _sweep_answers() -> list[Answer]:
    out = []
    for levels, target, cost, gpus, running, stream in itertools.product(
            SWEEPS.values(), TARGETS, (None, 98.32), (0, 8), (False, True), (False, True)):
        levels = [_stream(r) for r in levels] if stream else levels
        out.append(decide(levels, parse_slo(target) if target else None, cost_per_hour=cost, gpus=gpus,
                          running=running))
    # a streaming sweep judged by its objectives rather than a latency target
    for levels in SWEEPS.values():
        out.append(decide([_stream(r) for r in levels], cost_per_hour=98.32, gpus=8,
                          stream_slos=parse_slos("ttft_p99=200ms,itl_p99=5ms")))
    return out


def test_every_sweep_answer_line_fits() -> None:
    answers = _sweep_answers()
    too_long = [a.line for a in answers if len(a.line) > ANSWER_ROOM]
    assert not too_long, too_long
    # the short forms still say the figure or why not: never an empty or cut line
    assert all(a.line.startswith(("answer: peak, ", "answer: at ", "answer: not decided: ")) for a in answers)
    decided = [a for a in answers if not a.not_decided]
    assert decided and all(" at concurrency " in a.line and "stable" in a.line for a in decided)
    assert any(a.line.startswith("answer: not decided: ") for a in answers)


@pytest.mark.parametrize(("unit", "items", "transport", "local", "bound", "ceiling"), list(itertools.product(
    ("GPU", "CPU instance"), ("images", "tokens"), ("http", "grpc", "system_shm", "cuda_shm"), (True, False),
    BOUNDS, (9_000.0, 1_234_567.0))))
def test_every_request_path_answer_fits_and_keeps_what_matters(unit: str, items: str, transport: str, local: bool,
                                                               bound: str, ceiling: float) -> None:
    seen = {CLIENT: {"client_bound": True}, HOST_CPU: {"host_full": True, "host_cpu_percent": 97.0},
            WIRE: {"near_wire": True, "wire_peak": ceiling}, OUTSIDE: {"outside_server": True}}[bound]
    configs = [PeakEvidence(v, n, ceiling * (0.9 if n == 1 else 1.0), transport=transport, request_bytes=602_112,
                            **seen)  # type: ignore[arg-type]
               for v, n in (("1x", 1), ("2x", 2), ("4x", 4), ("1x*4", 4), ("8x", 8))]
    cap = request_path_cap(configs, unit, server_local=local, items=items)
    assert cap is not None
    line = f"answer: {cap.answer}"
    assert len(line) <= ANSWER_ROOM, line
    # the cap figure, the cause in a few words, the one next step; the detail is in cap.line
    assert f"{ceiling:,.0f} {items}/s" in line and f"({bound})" in line and "; next: " in line
    assert "1x*4" in cap.line and "602 KB" in cap.line and "1x*4" not in line


@pytest.mark.parametrize(("unit", "items", "ceiling"), list(itertools.product(
    ("GPU", "CPU instance"), ("images", "tokens"), (9_000.0, 1_234_567.0))))
def test_a_request_path_answer_on_a_crowded_host_fits(unit: str, items: str, ceiling: float) -> None:
    configs = [PeakEvidence(v, n, ceiling, host_full=True, host_cpu_percent=99.5, host_others_percent=83.7)
               for v, n in (("1x", 1), ("8x", 8))]
    cap = request_path_cap(configs, unit, items=items)
    assert cap is not None and len(f"answer: {cap.answer}") <= ANSWER_ROOM, cap
    assert f"{ceiling:,.0f} {items}/s" in cap.answer and "others 84%" in cap.answer and "quieter box" in cap.answer


@dataclass
class _Config:  # what answer_line reads of a ConfigFigures
    variant: str
    answer: Answer
    streaming: bool = False
    deciding_cost: float | None = 0.000217

    @property
    def not_decided(self) -> str:
        return self.answer.not_decided


@dataclass
class _Figures:  # what answer_line reads of a StudyFigures
    configs: list[_Config]
    stop: StopAt
    basis: str = "at p99 <= 99999 ms"
    unit: str = "CPU instance"
    failed: dict[str, str] = field(default_factory=dict)
    request_cap: object = None


def test_every_study_answer_line_fits() -> None:
    slo = parse_slo("p99=99999ms")
    decided = decide(STABLE, slo, cost_per_hour=98.32, gpus=8)
    noisy = decide(NOISY, slo)
    unmet = decide(STABLE, parse_slo("p99=1ms"))
    many = [f"cpu{n}*{m}" for n in (1, 2, 4, 8) for m in (1, 2, 4)]
    figures = [
        # a size to stop at, every other config not decided, by two causes
        _Figures([_Config("cpu8", decided), *(_Config(v, noisy if i % 2 else unmet) for i, v in enumerate(many))],
                 StopAt("cpu8", 8, "stop at 8 CPU instances")),
        _Figures([_Config("cpu8", decided)], StopAt("cpu8", 8, "stop at 8 CPU instances")),
        # no size: every config not decided
        _Figures([_Config(v, noisy if i % 2 else unmet) for i, v in enumerate(many)],
                 StopAt(None, None, "not decided: " + "; ".join(f"{v} (no sound level)" for v in many))),
        _Figures([], StopAt(None, None, "no config produced a usable result (at p99 <= 99999 ms)")),
        # configs that failed, with long reasons
        _Figures([_Config("cpu8", decided)], StopAt("cpu8", 8, "stop at 8 CPU instances"),
                 failed={v: f"{v} failed (the embedded server exited with code 1 before it was ready: see its log)"
                         for v in many}),
    ]
    lines = [answer_line(f) for f in figures]  # type: ignore[arg-type]
    assert all(len(line) <= ANSWER_ROOM for line in lines), [line for line in lines if len(line) > ANSWER_ROOM]
    assert lines[0].startswith("answer: at p99 <= 99999 ms, stop at 8 CPU instances (cpu8): ")
    assert lines[0].endswith("12 configs not decided)")  # their names and causes stand above, not here
    assert lines[1].endswith("stable (12 levels re-measured)")
    assert lines[2] == "answer: not decided: 12 configs, each one's reason above"
    assert lines[4].startswith("answer: not decided: ")
