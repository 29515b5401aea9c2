"""Headless lines for a study: the variant sessions' own lines (HeadlessPrinter), plus the study's
progress with the time left for the whole study. Never imports Textual."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import events as ev
from engine import format as fmt
from engine.analysis.time_left import TimeLeft, time_left_words
from tui.headless import HeadlessPrinter, ending
from tui.study_state import StudyState


def time_left_text(t: TimeLeft | None, where: str = "") -> str:
    """"≈4m10s left (3m–52m)" by the sweep's rule (engine/analysis/time_left.py), ``where``
    after "left"; "time left not known yet" before the study started."""
    return "time left not known yet" if t is None else time_left_words(t, where)


def running_config(current: str | None) -> str:
    """" (cpu2)" while a config runs; nothing once none does (not "(-)")."""
    return f" ({current})" if current else ""


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "estimating"
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m" if h else f"{m}m {s:02d}s"


class StudyPrinter(HeadlessPrinter):
    def __init__(self, console=None) -> None:  # noqa: ANN001 - a rich Console
        super().__init__(console)
        self.study = StudyState()

    def _handle(self, event: ev.Event) -> None:  # on the writer thread, under the lock
        self.study.apply(event)
        if isinstance(event, ev.SessionStarted):
            self.state.reset()  # each variant is its own session: its own tables
            self._sweep_header_printed = False
        self.state.apply(event)
        text = self._study_line(event)
        if text is not None:
            self._plain(text, "bold")
        else:
            self._print_event(event)
        if isinstance(event, ev.LevelResult):
            self._plain(self.progress_line(), "dim")

    def _print_sweep_answer(self) -> None:
        if self.study.current:  # each config's own answer, above the study's
            self._plain(f"  config {self.study.current}: {self.state.answer().line.removeprefix('answer: ')}", "bold")

    def progress_line(self) -> str:
        s = self.study
        n, total = s.position()
        return (f"study: config {n}/{total}{running_config(s.current)}, {fmt.plural(s.levels_done(), 'level')} done, "
                f"{duration(s.elapsed_s)} elapsed, {time_left_text(s.time_left(), ' for the whole study')}")

    def _study_line(self, event: ev.Event) -> str | None:
        line = _STUDY_LINES.get(type(event))
        return line(self, event) if line is not None else None

    def _study_started(self, event: ev.StudyStarted) -> str:
        slo = f", latency target {event.slo} (search: up to {fmt.plural(event.search_steps, 'level')})" if event.slo else ""
        levels = ", ".join(fmt.level(event.mode, x) for x in event.levels)
        article = "an" if event.server[:1] in "aeiou" else "a"
        return (f"study of {event.model}: configs {', '.join(event.variants)} on {article} {event.server} server, "
                f"levels {levels}{slo}\nindex: {event.index_path}")

    def _variant_started(self, event: ev.StudyVariantStarted) -> str:
        return f"=== config {event.position + 1}/{len(self.study.configs)}: {event.variant} ({event.how})"

    def _variant_finished(self, event: ev.StudyVariantFinished) -> str:
        where = f", recording {event.recording}" if event.recording else ""
        error = f": {event.error}" if event.error else ""
        return f"=== config {event.variant}: {event.status} (exit {event.exit_code}){where}{error}"

    def _study_finished(self, event: ev.StudyFinished) -> str:
        missing = f"; missing: {', '.join(event.missing)}" if event.missing else ""
        answers = "".join(f"\n{line}" for line in event.scale_answers)  # scale out or scale up
        forecasts = "".join(f"\n{line}" for line in event.forecast_lines)  # predicted, then checked
        return f"study {event.status}: finished {', '.join(event.finished) or 'none'}{missing}{answers}{forecasts}"

    def finish_study(self, exit_code: int, index_path: Path | None, report_lines: list[str]) -> None:
        self.close()
        with self._lock:
            for line in report_lines:
                self._plain(line)
            if index_path is not None:
                self._plain(f"study index: {index_path}", "bold")
            self._plain(*ending(exit_code))
            finished = self.study.finished
            self._plain(finished.answer if finished is not None and finished.answer
                        else "answer: not decided: the study did not finish", "bold")


# The study's own events, each one bold line; the sessions' events print as HeadlessPrinter prints them.
_STUDY_LINES: dict[type, Callable[[StudyPrinter, Any], str]] = {
    ev.StudyStarted: StudyPrinter._study_started,
    ev.StudyVariantStarted: StudyPrinter._variant_started,
    ev.StudyVariantFinished: StudyPrinter._variant_finished,
    ev.StudyFinished: StudyPrinter._study_finished,
}
