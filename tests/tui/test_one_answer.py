"""One recording with an unstable level, a contended one (the most throughput), a level measured
again and a level interrupted by Ctrl-C, fed to every surface: the live state, a replay, the
headless end line, the status bar, the Markdown and HTML reports, compare and the gates. They
all name the same best level, throughput, cost and answer line."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from engine import events as ev
from engine.analysis.gates import evaluate_gates
from engine.profiles import Gates
from engine.record.compare import compare
from engine.record.doc import to_html, to_markdown
from engine.record.findings import analyze
from engine.record.reader import Recording
from engine.record.recording_report import build_report
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.structs import replace
from tui.headless import HeadlessPrinter
from tui.state import SessionState
from tui.widgets.status import summary_line


def noisy_session() -> list[ev.Event]:
    events = synthetic_session(SyntheticRun(variant="1x", gpu_count=1, probe=False, capacity_per_gpu_ips=80.0))
    out: list[ev.Event] = []
    for e in events:
        if isinstance(e, ev.LevelResult) and e.level == 4:
            out.append(replace(e, status="unstable"))
        elif isinstance(e, ev.LevelResult) and e.level == 16:  # the most throughput, under others' load
            out.append(replace(e, status="contended", throughput_ips=999.0, others_cpu=0.6))
        elif isinstance(e, ev.LevelResult) and e.level == 8:  # measured again: the first trial said 5000
            out.append(replace(e, status="unstable", throughput_ips=5000.0,
                                           remeasure="its windows did not agree"))
            out.append(ev.LevelStarted(mode=e.mode, level=e.level, index=e.index, total=7, trial=2, ts=e.ts + 0.001))
            out.append(replace(e, trial=2, ts=e.ts + 0.002))
        elif isinstance(e, ev.LevelResult) and e.level == 128:  # Ctrl-C mid-level
            out.append(replace(e, status="interrupted", throughput_ips=7000.0))
        elif isinstance(e, ev.SessionEnded):
            out.append(replace(e, status="interrupted", exit_code=130))
        else:
            out.append(e)
    return out


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_events(tmp_path_factory.mktemp("noisy") / "run.sqlite", noisy_session())


def replayed(path: Path) -> SessionState:
    from engine.record.replay_source import ReplaySource

    state = SessionState()
    source = ReplaySource(path, speed=None, linger=False)
    source.bus.subscribe(state.apply)
    source.start()
    assert source.join(30)
    return state


def test_every_surface_gives_the_same_answer(recording: Path) -> None:
    live = SessionState()
    for e in noisy_session():
        live.apply(e)
    answer = live.answer()
    assert answer.best is not None and answer.cost_per_1000 is not None
    best_level, best_ips, line = answer.best.level, answer.best.throughput_ips, answer.line
    # the figures come from sound levels only: neither 999 (contended), 5000 (superseded) nor 7000 (interrupted)
    assert best_ips < 999.0 and answer.remeasured == 1
    # by kind the line would pass 160 characters: it counts them, and each one's reason stands above it
    assert line.endswith("(1 level re-measured; 3 of 7 levels not sound, left out)") and len(line) <= 160
    assert answer.details == ["left out: concurrency 4 unstable", "left out: concurrency 16 contended (others took 60 % "
                              "of the CPU)", "left out: concurrency 128 interrupted"]
    row = live.best_level()
    assert row is not None and row.level == best_level

    replay = replayed(recording)
    assert replay.answer().line == line
    best_row = replay.best_level()
    assert best_row is not None and best_row.level == best_level

    with Recording.open(recording) as rec:
        summary = rec.summary()
        findings = analyze(summary)
        assert findings.answer is not None and findings.answer.line == line
        assert findings.peak is not None and (findings.peak.level, findings.peak.throughput) == (best_level, best_ips)
        assert findings.cost_per_1000_at_peak == pytest.approx(answer.cost_per_1000)
        doc = build_report(summary, findings)
        assert to_markdown(doc).splitlines()[2] == line  # the answer opens the report
        assert line.replace("<", "&lt;") in to_html(doc) or line in to_html(doc)
        twin = recording.with_name("twin.sqlite")  # compare takes two or more
        twin.write_bytes(recording.read_bytes())
        with Recording.open(twin) as other:
            for run in compare([rec, other]).runs:
                assert run.findings.answer is not None and run.findings.answer.line == line
                assert run.findings.peak is not None and run.findings.peak.throughput == best_ips
        gate = evaluate_gates(Gates(min_throughput=best_ips * 2), [lv.result for lv in findings.levels])
        assert gate == [f"min_throughput: best {best_ips:.4g}/s (at {best_level:g}) < {best_ips * 2:g}/s"]

    out = io.StringIO()
    printer = HeadlessPrinter(Console(file=out, width=400))
    for e in noisy_session():
        printer(e)
    printer.finish(130, recording)
    assert out.getvalue().rstrip().splitlines()[-1] == line
    assert line in summary_line(live, 2000).plain  # the TUI's header
