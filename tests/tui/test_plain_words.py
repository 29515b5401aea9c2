"""Words that said something false or clumsy, each checked where it is made: a doubled "host",
"1 levels", "the last 12 shown" of 4, an interrupted run called failed."""

from __future__ import annotations

import io

from rich.console import Console

from engine import events as ev
from engine.check.facts import HostFacts
from engine.check.verdicts import judge_contention, overall
from tests.structs import replace
from tests.tui.synthetic import T0, session_events
from tui.headless import HeadlessPrinter, ending
from tui.level_detail import windows_title
from tui.study_headless import StudyPrinter


def test_host_contention_is_said_once() -> None:
    (item,) = judge_contention(HostFacts(others_cpu=0.9, others_top=["python (1) 90 %"]))
    _, line = overall([item], gpu_count=1)
    assert "host contention: 90 %" in line and "host host" not in line, line


def test_the_slo_search_counts_its_levels_in_words() -> None:
    printer = StudyPrinter(Console(file=io.StringIO(), width=160))
    one = ev.StudyStarted(study_id="s", model="m", variants=["1x"], levels=[1], mode="concurrency",
                          server="embedded", slo="p99=50ms", search_steps=1)
    assert "(search: up to 1 level)" in printer._study_started(one)
    assert "up to 1 levels" not in printer._study_started(one)
    assert "(search: up to 4 levels)" in printer._study_started(replace(one, search_steps=4))


def test_the_windows_title_says_the_last_n_only_when_some_are_not_shown() -> None:
    assert windows_title(4, 12) == "windows (4)"
    assert windows_title(20, 12) == "windows (20, the last 12 shown)"


def test_an_interrupted_run_is_not_called_failed() -> None:
    assert ending(130) == ("interrupted (exit code 130)", "bold magenta")
    assert ending(1)[0] == "failed (exit code 1)" and ending(0)[0] == "done"
    out = io.StringIO()
    printer = HeadlessPrinter(Console(file=out, width=160))
    for event in [*session_events(end=False, probe=False),
                  ev.SessionEnded(status="interrupted", exit_code=130, ts=T0 + 999)]:
        printer(event)
    printer.finish(130, None)
    text = out.getvalue()
    assert "session ended: interrupted (exit 130)" in text and "interrupted (exit code 130)" in text
    assert "failed (exit" not in text and "session ended: failed" not in text, text
    study = io.StringIO()
    StudyPrinter(Console(file=study, width=160)).finish_study(130, None, [])
    assert "interrupted (exit code 130)" in study.getvalue() and "failed (exit" not in study.getvalue()


def test_a_study_prints_each_configs_answer_under_its_table_and_its_own_answer_once_last() -> None:
    from tests.structs import replace

    out = io.StringIO()
    printer = StudyPrinter(Console(file=out, width=160))
    printer(ev.StudyStarted(study_id="s", model="m", variants=["cpu2"], levels=[1], mode="concurrency",
                            server="embedded"))
    printer(ev.StudyVariantStarted(variant="cpu2", position=0))
    for event in session_events(probe=False):
        printer(replace(event, status="unstable") if isinstance(event, ev.LevelResult) else event)
    printer(ev.StudyFinished(status="ok", finished=["cpu2"], answer="answer: not decided: cpu2 (no sound level)"))
    printer.finish_study(0, None, [])
    lines = out.getvalue().rstrip().splitlines()
    assert [line for line in lines if line.startswith("answer: ")] == ["answer: not decided: cpu2 (no sound level)"]
    assert lines[-1] == "answer: not decided: cpu2 (no sound level)"
    config = [line for line in lines if line.startswith("  config cpu2: ")]
    assert config == ["  config cpu2: not decided: 4 of 4 levels unstable; measure with more windows or trials"]
