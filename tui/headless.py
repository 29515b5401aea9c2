"""The headless printer: `--record` progress as plain lines that read well in a log file.

A bus subscriber that never imports Textual. Lines carry the session-relative time from the
events themselves, tables use fixed-width columns, and nothing moves the cursor, so
`nohup gpuscale-tui --record > run.log` is as readable as the terminal.

The bus calls subscribers on the session's thread, which also collects the workers' ticks and
polls the server's statistics: a write to a paused terminal or a full pipe must not stall it.
So the subscriber only queues the event; a writer thread of its own applies and prints it, and
``finish``/``close`` wait for it to catch up.
"""

from __future__ import annotations

import dataclasses
import queue
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.text import Text

from engine import columns
from engine import events as ev
from engine import format as fmt
from engine.analysis.scaling import cost_per_million_tokens
from engine.analysis.stream_slo import goodput_line
from engine.analysis.stream_split import DECOUPLED_SPLIT
from engine.analysis.time_left import time_left_words
from engine.columns import token_word
from engine.outcome import EXIT_INTERRUPTED
from engine.probe.table import bill_text
from engine.record.safe_text import terminal_text
from engine.triton.sequences import batcher_line, sequence_config
from tui import tables
from tui.describe import describe, severity
from tui.state import SessionState, notice_key

TELEMETRY_EVERY_S = 30.0  # one GPU/host summary line per this much session time
TIME_LEFT_EVERY_S = 30.0  # a window line says the time left again this long after the last
LOG_WIDTH = 160  # a file has no width: wide enough that table rows never wrap
STYLE = {"error": "bold red", "warning": "yellow", "info": ""}
_CLOSE = object()  # the writer thread's last item


ROW_LEAD = 7  # "level  ", "sweep  ": the words before a table row
# dropped in this order where a terminal is narrower than the table: the figures a log can spare
NARROW_DROPS = ("batch", "errors", "cost", "p95")


def fit_columns(cols: tuple[columns.Column[Any], ...], width: int) -> tuple[columns.Column[Any], ...]:
    """The sweep table within ``width`` characters (a terminal of 80 columns): less-needed
    columns go first, then the longest headers lose their unit; a log file (LOG_WIDTH) keeps all."""
    def line(cs: tuple[columns.Column[Any], ...]) -> int:
        return ROW_LEAD + sum(c.width for c in cs) + 2 * (len(cs) - 1)

    kept = cols
    for key in NARROW_DROPS:
        if line(kept) <= width:
            return kept
        kept = tuple(c for c in kept if c.key != key)
    for key in ("compute", "queue"):
        if line(kept) <= width:
            break
        kept = tuple(dataclasses.replace(c, header=c.short, width=max(len(c.short), 7))
                     if c.key == key and c.short else c for c in kept)
    return kept


class HeadlessPrinter:
    def __init__(self, console: Console | None = None) -> None:
        if console is None:
            console = Console(highlight=False)
            if not console.is_terminal:
                console = Console(highlight=False, width=LOG_WIDTH)
        self.console = console
        self.state = SessionState()
        self._lock = threading.Lock()
        self._sweep_header_printed = False
        self._probe_header_printed = False
        self._last_telemetry_t: float | None = None
        self._time_left_t: float | None = None  # session time the time left was last printed
        self._seen_notices: set[str] = set()
        self._fatal_shown: set[str] = set()  # fatal errors printed: the end lines do not repeat them
        self._details_printed = False  # the sweep's left-out levels, under its result table
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()  # unbounded: put never blocks
        self._writer: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.failure: BaseException | None = None  # the printer's own bug, if one stopped it

    # ------------------------------------------------------------------ subscriber

    def __call__(self, event: ev.Event) -> None:
        """The bus's call, on the publisher's thread: queue and return (never touches stdout)."""
        if self._writer is None:
            with self._start_lock:
                if self._writer is None:
                    self._writer = threading.Thread(target=self._drain, name="headless-printer", daemon=True)
                    self._writer.start()
        self._queue.put(event)

    def _drain(self) -> None:
        while (item := self._queue.get()) is not _CLOSE:
            if self.failure is not None:
                continue  # stopped: keep emptying the queue so close() returns
            try:
                with self._lock:
                    self._handle(item)  # type: ignore[arg-type]  # only events and _CLOSE are queued
            except Exception as exc:  # as the bus does with a broken consumer: say it once, go on measuring
                self.failure = exc
                print(f"gpuscale-tui: the progress printer failed and stopped: {exc!r}", file=sys.stderr)

    def _handle(self, event: ev.Event) -> None:
        self.state.apply(event)
        self._print_event(event)

    def close(self) -> None:
        """Wait until every queued event is printed (blocks while stdout does, after the run)."""
        with self._start_lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            self._queue.put(_CLOSE)
            writer.join()

    def _line(self, text: str, style: str = "", t: float | None = None) -> None:
        stamp = fmt.clock(self.state.rel(t) if t is not None else self.state.elapsed_s)
        self.console.print(Text(f"[{stamp}] ", style="dim") + Text(terminal_text(text), style=style), soft_wrap=True)

    def _plain(self, text: str, style: str = "") -> None:
        self.console.print(Text(terminal_text(text), style=style), soft_wrap=True)

    def _print_event(self, event: ev.Event) -> None:
        _PRINTERS.get(type(event), HeadlessPrinter._print_line)(self, event)

    def _print_line(self, event: ev.Event) -> None:
        """Most events: their one line (tui/describe.py), if they have one."""
        text = describe(event)
        if text is not None:
            self._line(text, STYLE[severity(event)], event.ts)

    def _print_notice(self, event: ev.Warning | ev.Error) -> None:
        key = notice_key(event)
        if isinstance(event, ev.Error) and event.fatal:
            self._fatal_shown.add(event.message)
        if key not in self._seen_notices:  # shown once; the final summary counts repeats
            self._seen_notices.add(key)
            self._print_line(event)

    def _print_session_ended(self, event: ev.SessionEnded) -> None:
        """Its error once: not again when a fatal error line already said it."""
        if event.error and event.error in self._fatal_shown:
            event = msgspec.structs.replace(event, error=None)
        self._print_line(event)

    def _print_level_started(self, event: ev.LevelStarted) -> None:
        if event.index == 0 and event.trial <= 1:
            self._sweep_header_printed = False  # a new sweep: its own table
            self._details_printed = False
        text = describe(event)
        if text is not None:
            self._line(text + self._time_left(), STYLE[severity(event)], event.ts)

    def _print_sweep_finished(self, event: ev.SweepFinished) -> None:
        self._print_line(event)
        self._print_sweep_summary()

    def _print_telemetry(self, event: ev.GpuSample | ev.HostSample) -> None:
        self._maybe_telemetry(event.ts)

    def _time_left(self) -> str:
        """The sweep's time left, in the words of the TUI's status line: a range the run keeps to
        (engine/analysis/time_left.py). Remembered, so that a long level says it again."""
        t = self.state.time_left()
        if t is None:
            return ""
        self._time_left_t = self.state.elapsed_s
        return " · " + time_left_words(t, " in the sweep")

    def _print_window(self, event: ev.WindowResult) -> None:
        """A window's line; every TIME_LEFT_EVERY_S within a level, with the time left again."""
        text = describe(event)
        if text is None:
            return
        since = self.state.elapsed_s - self._time_left_t if self._time_left_t is not None else None
        if since is not None and since >= TIME_LEFT_EVERY_S:
            text += self._time_left()
        self._line(text, STYLE[severity(event)], event.ts)

    # ------------------------------------------------------------------ tables

    def _print_level_row(self, event: ev.LevelResult) -> None:
        cols = fit_columns(tables.sweep_columns(self.state), self.console.width)
        if not self._sweep_header_printed:
            if self.state.sweep_number > 1:  # a second sweep of the session: its own table, named
                self._plain(f"sweep {self.state.sweep_number}", "bold")
            self._plain("sweep  " + columns.header_line(cols), "bold")
            if any(c.key == "split" for c in cols):  # once per table: why the column reads "not measured"
                self._plain(f"       {DECOUPLED_SPLIT}: Triton's queue and compute statistics do not cover a "
                            "stream's responses", "dim")
            if any(c.key == "cache_state" for c in cols):  # once per table: what the cache column's words mean
                self._plain(f"       {columns.CACHE_STATE_NOTE}", "dim")
            batcher = sequence_config(self.state.server.model_config) if self.state.server else None
            if batcher is not None and any(c.key == "seq_rate" for c in cols):  # the batcher's limits, once
                self._plain(f"       {batcher_line(batcher)}", "dim")
            self._sweep_header_printed = True
        row = self.state.levels.get(event.index)
        if row is None:
            return
        cells = tables.sweep_cells(row, self.state)
        style = {"failed": "bold red", "unstable": "yellow", "contended": "yellow",
                 "interrupted": "magenta"}.get(row.status, "")
        self._plain("level  " + columns.fixed_line(cols, cells), style)
        if event.remeasure:
            self._plain(f"       measured again: {event.remeasure} (trial {event.trial + 1} follows)", "yellow")
        for cells in tables.endpoint_cells(row):  # several servers: a row each under the level
            self._plain("       " + columns.fixed_line(cols, cells), "bold red" if cells["status"] == "failed" else "")
        for message in event.error_messages[:3]:
            self._plain(f"       error: {message}", "red")

    def _print_sweep_summary(self) -> None:
        if not self.state.levels:
            return
        cols = fit_columns(tables.sweep_columns(self.state), self.console.width)
        self._plain("")
        number = self.state.sweep_number
        self._plain(f"sweep {number} result" if number > 1 else "sweep result", "bold")
        self._plain("  " + columns.header_line(cols), "bold")
        for row in self.state.levels.values():
            self._plain("  " + columns.fixed_line(cols, tables.sweep_cells(row, self.state)))
            for cells in tables.endpoint_cells(row):
                self._plain("  " + columns.fixed_line(cols, cells))
        best = self.state.best_level()
        if best is not None and best.result is not None:
            unit = "req/s" if best.result.stream is not None else "infer/s"  # as the table above
            text = (
                f"  best: {fmt.rate(best.result.throughput_ips)} {unit} at level "
                f"{fmt.level(best.mode, best.level)} (p99 {fmt.ms(best.result.latency.p99)} ms)"
            )
            gpus = self.state.gpu_count
            if gpus:
                text += f", {fmt.rate(best.result.throughput_ips / gpus)} {unit} per GPU"
            stream = best.result.stream
            if stream is not None:  # a streaming model's: its tokens and their price, never per image
                word = token_word(stream)
                text += f", {fmt.rate(stream.output_tokens_per_s)} {word}/s"
                per_mtok = cost_per_million_tokens(self.state.cost_per_hour, stream.output_tokens_per_s)
                if per_mtok is not None:
                    text += f", {fmt.money(per_mtok)} per million output {word} at ${self.state.cost_per_hour:g}/h"
                cache = best.result.cache
                if cache is not None and cache.hit_rate is not None:  # the traffic the figure holds for
                    text += f", at {fmt.percent(cache.hit_rate)} prefix cache hits ({cache.state or 'state not known'})"
            elif (cost := self.state.cost_per_1000(best.result.throughput_ips)) is not None:
                text += f", {fmt.money(cost)} per 1000 images at ${self.state.cost_per_hour:g}/h"
            self._plain(text)
        line = goodput_line([r.result for r in self.state.levels.values() if r.result is not None],
                            self.state.slo_text, self.state.cost_per_hour)
        if line is not None:
            self._plain("  " + line)
        for detail in self.state.answer().details:  # why each level left out decides nothing
            self._plain("  " + detail, "yellow")
        self._details_printed = True
        self._print_sweep_answer()
        self._plain("")

    def _print_sweep_answer(self) -> None:
        """A run's answer is its last line (finish), not here; a study names each config's."""

    def _print_probe_row(self, event: ev.ProbeResult) -> None:
        if not self._probe_header_printed:
            self._plain("probe  " + columns.header_line(columns.PROBE), "bold")
            self._probe_header_printed = True
        self._plain("probe  " + columns.fixed_line(columns.PROBE, columns.cells(columns.PROBE, event)))

    def _print_allreduce(self, event: ev.AllReduceResult) -> None:
        cols = columns.allreduce_columns(event)
        self._line(columns.allreduce_title(event), "bold", event.ts)
        self._plain("  " + columns.header_line(cols), "bold")
        for item in columns.allreduce_items(event):
            self._plain("  " + columns.fixed_line(cols, columns.cells(cols, item)))

    def _print_wire(self, event: ev.WireCeiling) -> None:
        text = describe(event)
        if text is not None:
            self._line(text, "bold", event.ts)
        cols = columns.WIRE_SCREEN
        self._plain("  " + columns.header_line(cols), "bold")
        for level in event.levels:
            self._plain("  " + columns.fixed_line(cols, columns.cells(cols, columns.WireFigures(event.mode, level))))

    def _maybe_telemetry(self, ts: float) -> None:
        t = self.state.rel(ts)
        if self._last_telemetry_t is not None and t - self._last_telemetry_t < TELEMETRY_EVERY_S:
            return
        parts = []
        for track in self.state.gpus.values():
            r = track.latest
            mem = f"{fmt.gib(r.mem_used)}/{fmt.gib(r.mem_total)}G" if r.mem_used is not None else fmt.NA
            label = r.index if r.index is not None else track.uuid[-4:]
            parts.append(f"gpu{label} {fmt.percent_points(r.util_gpu)} {mem} {fmt.watts(r.power_w)}")
        host = self.state.host
        if host is not None:
            parts.append(f"host cpu {fmt.percent_points(host.latest.cpu_percent)}")
            if host.latest.own_cpu_percent is not None:
                parts.append(f"ours {fmt.percent_points(self.state.own_cpu_of_host(host.latest.own_cpu_percent))} of the host")
        if parts:
            self._last_telemetry_t = t
            self._line("telemetry: " + ", ".join(parts), "dim", ts)

    # ------------------------------------------------------------------ end

    def finish(self, exit_code: int, recording_path: Path | None) -> None:
        """The last lines: probe summary and its training bill, repeated warnings, where the recording is, the outcome."""
        self.close()
        with self._lock:
            state = self.state
            if len(state.probe) > 1:
                self._plain("")
                self._plain("probe result", "bold")
                self._plain("  " + columns.header_line(columns.PROBE), "bold")
                for result in state.probe:
                    self._plain("  " + columns.fixed_line(columns.PROBE, columns.cells(columns.PROBE, result)))
            if state.probe:
                self._plain("")
                title, *lines = bill_text(state.training_bill()).splitlines()
                self._plain(title, "bold")
                for line in lines:
                    self._plain("  " + line)
            repeated = [n for n in state.notices.values() if n.count > 1]
            for notice in repeated:
                self._plain(f"{notice.severity} x{notice.count} ({notice.source}): {notice.message}", STYLE[notice.severity])
            if recording_path is not None:
                self._plain(f"recording: {recording_path}", "bold")
            word, style = ending(exit_code)
            error = state.ended.error if state.ended and exit_code != 0 else None
            reason = f": {error}" if error and error not in self._fatal_shown else ""
            self._plain(f"{word}{reason}", style)
            line = run_answer_line(state)
            if line and not self._details_printed and (state.levels or state.past_sweeps):
                for detail in state.answer().details:  # a sweep cut short: no result table said them
                    self._plain("  " + detail, "yellow")
            if line:
                self._plain(line, "bold")  # once, the last line


def ending(exit_code: int) -> tuple[str, str]:
    """The run's end word and its style: done, interrupted (never "failed": a stop was asked), failed."""
    if exit_code == 0:
        return "done", "bold green"
    if exit_code == EXIT_INTERRUPTED:
        return f"interrupted (exit code {exit_code})", "bold magenta"
    return f"failed (exit code {exit_code})", "bold red"


def run_answer_line(state: SessionState) -> str:
    """The run's last line: the sweep's answer (engine/analysis/answer.py), else the training
    bill's stop rule; "" when the run measured neither."""
    if state.levels or state.past_sweeps:
        return state.answer().line
    if state.probe:
        stops = state.training_bill().stops
        return "answer: " + "; ".join(f"{s.label}: {s.stop.reason}" for s in stops) if stops else ""
    return ""


# What each kind of event prints; any other kind prints its one line (_print_line).
_PRINTERS: dict[type, Callable[[HeadlessPrinter, Any], None]] = {
    ev.GpuSample: HeadlessPrinter._print_telemetry,
    ev.HostSample: HeadlessPrinter._print_telemetry,
    ev.Warning: HeadlessPrinter._print_notice,
    ev.Error: HeadlessPrinter._print_notice,
    ev.SessionEnded: HeadlessPrinter._print_session_ended,
    ev.LevelStarted: HeadlessPrinter._print_level_started,
    ev.WindowResult: HeadlessPrinter._print_window,
    ev.LevelResult: HeadlessPrinter._print_level_row,
    ev.SweepFinished: HeadlessPrinter._print_sweep_finished,
    ev.ProbeResult: HeadlessPrinter._print_probe_row,
    ev.AllReduceResult: HeadlessPrinter._print_allreduce,
    ev.WireCeiling: HeadlessPrinter._print_wire,
}
