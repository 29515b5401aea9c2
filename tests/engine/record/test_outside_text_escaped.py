"""Text from outside, escaped for each place it is written: CSV cells never start a formula (numbers
stay numbers), Markdown holds no raw HTML nor line-made headings, and terminal lines (headless,
replay --headless, stderr) carry no escape codes from a server or a recording."""

from __future__ import annotations

import csv
import io
import sqlite3
from pathlib import Path

import pytest

from engine.events import Error, SessionEnded, Warning
from engine.record.safe_text import csv_cell, md_text, terminal_text
from tests.cli_runner import run_cli
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.reliability.hostile_server import HostileTriton, Reply, remote_profile

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x9b1m"
HTML = "<script>alert(1)</script>\n# Owned\n| a | b |"


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = SyntheticRun(levels=[1, 4], windows_per_level=2, gpu_count=2, variant="2x", probe=False)
    events = synthetic_session(run)
    end = next(i for i, e in enumerate(events) if isinstance(e, SessionEnded))
    ts = events[end].ts
    events[end:end] = [Warning(source="server", message=f"server said {ESCAPES} {HTML}", key="w", ts=ts),
                       Error(source="load", message=f"boom {ESCAPES}", ts=ts)]
    path = record_events(tmp_path_factory.mktemp("inj") / "run.sqlite", events)
    with sqlite3.connect(path) as conn:  # GPU UUIDs as a remote /metrics might name them
        conn.execute("UPDATE gpus SET uuid = '=HYPERLINK(\"http://x\",\"a\")' WHERE id = 1")
        conn.execute("UPDATE gpus SET uuid = '@SUM(1+1)' WHERE id = 2")
    return path


def test_csv_cells_never_start_a_formula_and_numbers_stay_numbers(recording, tmp_path):
    proc = run_cli("export", str(recording), "-f", "csv", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(io.StringIO(next(tmp_path.glob("*.csv")).read_text())))
    cells = [cell for row in rows[1:] for cell in row]
    assert any("HYPERLINK" in c for c in cells), "the GPU columns were not written: nothing was checked"
    assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")], cells
    assert [csv_cell(v) for v in ("-1.5", "+2", "-3e-05", "12", "-x", "=1+2", "@A1", "-2+3")] == [
        "-1.5", "+2", "-3e-05", "12", "'-x", "'=1+2", "'@A1", "'-2+3"]


def test_markdown_has_no_raw_html_nor_line_made_headings(recording, tmp_path):
    proc = run_cli("export", str(recording), "-f", "md", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    text = next(tmp_path.glob("*.md")).read_text()
    assert "alert(1)" in text, "the warning is not in the report: nothing was checked"
    assert "<script>" not in text and "\x1b" not in text
    assert not [line for line in text.splitlines() if line.startswith("# Owned") or line.startswith("| a | b |")]
    assert md_text("a\n## b | c <i> <0.001*") == "a ## b \\| c &lt;i> <0.001*"


def test_headless_replay_prints_no_escape_codes(recording):
    proc = run_cli("replay", "--headless", str(recording))
    assert proc.returncode == 0, proc.stderr
    assert "pwned" in proc.stdout, "the warning was not printed: nothing was checked"
    assert "\x1b" not in proc.stdout + proc.stderr and "\x9b" not in proc.stdout + proc.stderr
    assert "\\x1b]0;pwned\\x07" in proc.stdout  # shown, not obeyed


@pytest.mark.slow
def test_a_server_error_with_escape_codes_is_shown_not_obeyed(tmp_path):
    with HostileTriton(infer=Reply(500, {"error": f"bad {ESCAPES}"})) as srv:
        proc = run_cli("--record", "--output", str(tmp_path), "--profile", remote_profile(tmp_path / "p.toml", srv.where))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "pwned" in text, text[-2000:]
    assert "\x1b" not in text and "\x07" not in text, text[-2000:]


def test_terminal_text_keeps_lines_and_tabs():
    assert terminal_text("a\tb\nc\x1b[0m") == "a\tb\nc\\x1b[0m"
    assert terminal_text("a\nb\rc", keep_newlines=False) == "a b c"
