"""The same figure reads the same everywhere: one recorded level, probe result and
all-reduce row rendered by the TUI's table, the headless printer, the probe CLI and the report
(text, Markdown, HTML) carry the same strings for the same figures."""

from __future__ import annotations

import html
import io
import re
from pathlib import Path

from rich.console import Console

from engine import columns
from engine import events as ev
from engine.analysis.training_bill import training_bill
from engine.probe.table import allreduce_table, bill_text, probe_table
from engine.record.doc import to_html, to_markdown, to_text
from engine.record.reader import Recording
from engine.record.recorder import Recorder
from engine.record.recording_report import build_report
from engine.record.summary import summarize
from tests.tui.synthetic import session_events
from tui import tables
from tui.headless import HeadlessPrinter
from tui.state import SessionState
from tui.widgets.probe import bill_body

EVENTS = session_events()
LEVEL = next(e for e in EVENTS if isinstance(e, ev.LevelResult) and e.level == 16)
PROBES = [e for e in EVENTS if isinstance(e, ev.ProbeResult)]
ALLREDUCE = next(e for e in EVENTS if isinstance(e, ev.AllReduceResult))

# the figures as engine/format.py's rules read them (written out, so a changed rule shows here)
LEVEL_FIGURES = {"ips": "1,500", "p50": "16.4", "p95": "27.9", "p99": "36.1", "queue": "9.73", "compute": "1.60"}
PROBE_FIGURES = {"single": "5,000", "multi": "17,000", "speedup": "3.40x", "efficiency": "85%", "mem": "0.52",
                 "util": "67%", "p": "<0.001*"}
# the training bill of the 4-GPU row: 1,281,167 samples per epoch at 17,000 (16,940-17,060) samples/s, the
# whole $1.20/hr box
BILL_EVENTS = session_events(dataset_size=1_281_167)
BILL_FIGURES = {"epoch": "1m15s", "epoch_ci": "1m15s-1m16s", "price": "$1.20", "cost": "$0.0251",
                "cost_ci": "$0.0250-$0.0252"}
ALLREDUCE_FIGURES = {"size": "64 MiB", "time": "3,375.4", "algbw": "19.88", "busbw": "29.82", "limit": "93%"}


def screen(table: object, width: int = 200) -> str:
    console = Console(width=width, color_system=None, record=True)
    with console.capture() as capture:
        console.print(table)
    return capture.get()


def headless(events: list[ev.Event] = EVENTS) -> str:
    out = io.StringIO()
    printer = HeadlessPrinter(Console(file=out, width=200, color_system=None, highlight=False))
    for event in events:
        printer(event)
    printer.finish(0, None)
    return out.getvalue()


def report(tmp_path: Path, events: list[ev.Event] = EVENTS) -> dict[str, str]:
    """The session recorded, read back and reported as the `report` command does."""
    path = tmp_path / "run.sqlite"
    recorder = Recorder(path)
    for event in events:
        recorder(event)
    recorder.close()
    with Recording.open(path) as recording:
        doc = build_report(summarize(recording))
    return {"text": to_text(doc), "markdown": to_markdown(doc), "html": html.unescape(to_html(doc))}


def row_with(text: str, first: str) -> str:
    """The table rows (lines, or HTML rows) of ``text`` whose first cell is ``first``, joined: the
    report splits a level over two tables (throughput and latency; queue vs compute)."""
    rows = re.split(r"\n|</tr>", text)
    found = [r for r in rows if re.match(rf"(\s*|\|\s*|<tr><td[^>]*>){re.escape(first)}(\s|</td>)", r)]
    assert found, first
    return " | ".join(found)


def assert_reads(renderings: dict[str, str], first: str, figures: dict[str, str]) -> None:
    for name, text in renderings.items():
        line = row_with(text, first)
        for key, figure in figures.items():
            assert re.search(rf"(^|[\s|>]){re.escape(figure)}([\s|<]|$)", line), (name, key, figure, line)


def test_the_shared_columns_give_these_figures() -> None:
    cells = columns.cells(columns.SWEEP, columns.LevelFigures.of(LEVEL))
    assert {k: cells[k] for k in LEVEL_FIGURES} == LEVEL_FIGURES
    cells = columns.cells(columns.PROBE, PROBES[2])
    assert {k: cells[k] for k in PROBE_FIGURES} == PROBE_FIGURES
    cells = columns.cells(columns.ALLREDUCE, (ALLREDUCE, ALLREDUCE.rows[-1]))
    assert {k: cells[k] for k in ALLREDUCE_FIGURES} == ALLREDUCE_FIGURES


def test_a_level_reads_the_same_on_screen_in_the_log_and_in_the_report(tmp_path: Path) -> None:
    state = SessionState()
    state.apply_all(EVENTS)
    lines = headless().splitlines()
    summary = lines[lines.index("sweep result") + 1:]
    renderings = {
        "tui": screen(tables.sweep_table(state, 200, curve=False)),
        "headless": "\n".join(summary),
    }
    assert_reads(renderings, "16", LEVEL_FIGURES)
    # the report splits compute into input, infer and output (its queue-vs-compute table)
    assert_reads(report(tmp_path), "16", {k: v for k, v in LEVEL_FIGURES.items() if k != "compute"})


def test_a_probe_result_reads_the_same_everywhere(tmp_path: Path) -> None:
    renderings = {
        "tui": screen(tables.probe_table(PROBES)),
        "headless": headless(),
        "probe cli": probe_table(PROBES),
        **report(tmp_path),
    }
    for name, text in renderings.items():  # the 4-GPU row, the only one at 17,000 samples/s
        line = next(r for r in re.split(r"\n|</tr>", text) if "17,000" in r and "mlp_6.9m" in r)
        for figure in PROBE_FIGURES.values():
            assert re.search(rf"(^|[\s|>]){re.escape(figure)}([\s|<]|$)", line), (name, figure, line)


def test_an_allreduce_row_reads_the_same_everywhere(tmp_path: Path) -> None:
    renderings = {
        "tui": screen(tables.allreduce_table(ALLREDUCE)),
        "headless": headless(),
        "probe cli": allreduce_table(ALLREDUCE),
        **report(tmp_path),
    }
    for name, text in renderings.items():
        line = next(r for r in re.split(r"\n|</tr>", text) if "64 MiB" in r)
        for figure in ALLREDUCE_FIGURES.values():
            assert figure in line, (name, figure, line)


def test_the_training_bill_reads_the_same_everywhere(tmp_path: Path) -> None:
    bill = training_bill(PROBES, 1_281_167, 1.2, box_gpus=4)
    cells = columns.cells(columns.BILL, bill.rows[2])
    assert {k: cells[k] for k in BILL_FIGURES} == BILL_FIGURES
    state = SessionState()
    state.apply_all(BILL_EVENTS)
    renderings = {
        "tui": screen(bill_body(state, 200)),
        "headless": headless(BILL_EVENTS),
        "probe cli": bill_text(bill),
        **report(tmp_path, BILL_EVENTS),  # recorded, read back: the dataset size comes with the profile
    }
    stop = bill.stops[0].stop.reason
    for name, text in renderings.items():
        line = next(r for r in re.split(r"\n|</tr>", text) if "17,000" in r and "$" in r)
        for figure in BILL_FIGURES.values():
            assert re.search(rf"(^|[\s|>]){re.escape(figure)}([\s|<]|$)", line), (name, figure, line)
        assert "mlp_6.9m ddp weak b32:" in text and " ".join(stop.split()[:8]) in " ".join(text.split()), name
        assert "$0.300/hr per GPU, pro rata" in text, name
