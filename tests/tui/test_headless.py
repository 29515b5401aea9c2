"""The headless printer: log-friendly lines, the result tables, no Textual."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

from rich.console import Console

from engine import events as ev
from engine.bus import EventBus
from tests.structs import replace
from tests.tui.synthetic import T0, gpu_sample, session_events
from tui.headless import HeadlessPrinter


def printed(events: list[ev.Event], exit_code: int = 0, path: Path | None = Path("recordings/run.sqlite")) -> str:
    out = io.StringIO()
    printer = HeadlessPrinter(Console(file=out, width=160))  # a file: not a terminal
    for event in events:
        printer(event)
    printer.finish(exit_code, path)
    return out.getvalue()


def test_importing_the_printer_does_not_import_textual() -> None:
    code = "import sys, tui.headless; sys.exit(1 if 'textual' in sys.modules else 0)"
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_output_to_a_file_has_no_escape_codes() -> None:
    text = printed(session_events())
    assert "\x1b" not in text and "\r" not in text


def test_sweep_rows_print_as_levels_finish_with_every_column() -> None:
    text = printed(session_events())
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("sweep "))
    for column in ("level", "infer/s", "p50 ms", "p95 ms", "p99 ms", "queue ms", "compute ms", "avg batch",
                   "status", "client", "$/1k img"):
        assert column in header
    rows = [line for line in lines if line.startswith("level ")]
    assert len(rows) == 4
    assert rows[0].split()[1:3] == ["1", "180.0"]
    assert "unstable" in rows[2] and "BOUND" in rows[3]
    # Each row comes right after its level's windows, before the next level starts.
    first_row = lines.index(rows[0])
    assert "window 3" in lines[first_row - 1] or lines[first_row - 1].startswith("sweep ")
    assert "level 2/4" in lines[first_row + 1]


def test_sweep_summary_names_the_best_level_and_its_cost() -> None:
    text = printed(session_events(cost_per_hour=1.2))
    assert "best: 1,500 infer/s at level 16" in text
    assert "375.0 infer/s per GPU" in text
    assert "$0.000222 per 1000 images at $1.2/h" in text


def test_no_cost_column_without_a_price() -> None:
    text = printed(session_events(cost_per_hour=0.0))
    assert "$/1k img" not in text and "per 1000 images" not in text


def test_probe_and_allreduce_tables() -> None:
    lines = printed(session_events()).splitlines()
    probe_rows = [line for line in lines if line.startswith("probe  mlp")]
    assert len(probe_rows) == 3
    assert probe_rows[1].split()[:5] == ["probe", "mlp_6.9m", "ddp", "weak", "32"]
    assert "1.86x" in probe_rows[1] and "93%" in probe_rows[1] and "0.52" in probe_rows[1].split()
    header = next(line for line in lines if line.startswith("probe  model"))
    for column in ("batch", "GPUs", "single/s", "multi/s", "speedup", "effic.", "GiB/GPU", "GPU util"):
        assert column in header
    start = next(i for i, line in enumerate(lines) if "all-reduce, 4 ranks" in line)
    assert "busbw GB/s" in lines[start + 1]
    assert lines[start + 2].split()[:2] == ["1", "KiB"]
    assert len([line for line in lines[start + 2 : start + 7] if "GiB" in line or "MiB" in line or "KiB" in line]) == 5


def test_finish_prints_the_training_bill_or_what_to_set() -> None:
    lines = printed(session_events(dataset_size=1_281_167)).splitlines()
    at = lines.index("training bill")
    assert "epoch 95% CI" in lines[at + 1] and "$/epoch 95% CI" in lines[at + 1]
    assert [line.split()[4] for line in lines[at + 2 : at + 5]] == ["1", "2", "4"]
    assert lines[at + 6].startswith("  mlp_6.9m ddp weak b32: stop at 4 GPUs")
    lines = printed(session_events()).splitlines()  # no probe.dataset_size in the profile
    at = lines.index("training bill")
    assert lines[at + 1] == "  set probe.dataset_size (samples per epoch) for the time and $ per epoch"
    assert printed(session_events(probe=False)).count("training bill") == 0


def test_finish_prints_recording_path_and_outcome() -> None:
    ok = printed(session_events())
    lines = ok.rstrip().splitlines()
    assert lines[-3:-1] == ["recording: recordings/run.sqlite", "done"]
    assert lines[-1].startswith("answer: peak, ")  # every run ends with its answer
    assert len(lines[-1]) <= 160 and sum(line.startswith("answer: ") for line in lines) == 1
    events = session_events(end=False, probe=False)
    events.append(ev.SessionEnded(status="failed", error="every level failed", exit_code=1, ts=T0 + 999))
    failed = printed(events, exit_code=1).rstrip().splitlines()
    assert failed[-2] == "failed (exit code 1): every level failed" and failed[-1].startswith("answer: ")


def test_lines_carry_session_time_not_the_wall_clock() -> None:
    text = printed(session_events())
    assert "[00:00] session 20240101-000000-test started" in text
    assert "[00:03] server ready" in text


def test_repeated_warnings_print_once_then_counted_at_the_end() -> None:
    text = printed(session_events())
    assert text.count("PCIe counters unavailable") == 2  # when first seen, and the final count
    assert "warning x2 (telemetry): PCIe counters unavailable on this driver" in text


def test_telemetry_is_summarised_at_most_every_30_seconds() -> None:
    events = [session_events()[0]] + [gpu_sample(float(t), 2, 0.5) for t in range(0, 95)]
    lines = [line for line in printed(events).splitlines() if "telemetry:" in line]
    assert [line[:7] for line in lines] == ["[00:00]", "[00:30]", "[01:00]", "[01:30]"]
    assert "gpu0 45%" in lines[0]


def test_concurrent_publishers_do_not_interleave_lines() -> None:
    out = io.StringIO()
    printer = HeadlessPrinter(Console(file=out, width=160))
    printer(session_events()[0])

    def publish(source: str) -> None:
        for i in range(200):
            printer(ev.Warning(source=source, message=f"message {i} " + "x" * 40, ts=T0 + i))

    threads = [threading.Thread(target=publish, args=(f"t{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    printer.close()
    lines = out.getvalue().splitlines()[1:]
    assert len(lines) == 800
    assert all(line.endswith("x" * 40) and line.count("warning (") == 1 for line in lines)


def test_a_second_sweep_prints_under_its_own_name() -> None:
    """Which sweep a figure belongs to is said in the log too."""
    from tests.tui.synthetic import two_sweep_events

    lines = printed(two_sweep_events()).splitlines()
    first = lines.index("sweep result")
    second = lines.index("sweep 2 result")
    assert first < lines.index("sweep 2") < second
    assert "1,500" in "\n".join(lines[first:second]) and "217.0" in lines[second + 2]
    best = next(line for line in lines[second:] if line.startswith("  best:"))
    assert "217.0 infer/s at level 1" in best


def test_each_level_start_says_the_time_left() -> None:
    """The TUI shows the time left; the headless log did not."""
    lines = [line for line in printed(session_events()).splitlines() if "] level " in line and "/4:" in line]
    assert len(lines) == 4
    assert all("left in the sweep" in line for line in lines)
    # the first from the profile's plan, no level's setup measured yet: no ceiling is claimed
    assert lines[0].endswith("≈28s left in the sweep (at least 28s)"), lines[0]
    # the last: its warm-up and 3 windows of 2 s at least, the levels' 0.1 s after their windows;
    # at most 6 windows of 2 s + request_timeout_s 30 s + two ticks, re-trials within the budget
    assert lines[-1].endswith("≈7s left in the sweep (7s–8m33s)"), lines[-1]


def test_a_long_level_says_the_time_left_again() -> None:
    """A level that runs long says the time left on a window line every TIME_LEFT_EVERY_S."""
    from tui.headless import TIME_LEFT_EVERY_S

    events = session_events(finish_levels=1, end=False)
    last = [e for e in events if isinstance(e, ev.WindowResult)][-1]
    t = last.t_end
    for w in range(4):  # 20 s windows: the 2nd and 4th end TIME_LEFT_EVERY_S past the last saying
        events.append(replace(last, index=last.index + 1 + w, t_start=t, t_end=t + 20.0, ts=t + 20.0,
                                          stable_so_far=False))
        t += 20.0
    assert 24.0 < TIME_LEFT_EVERY_S <= 40.0
    lines = printed(events).splitlines()
    start = next(i for i, line in enumerate(lines) if "] level 2/4:" in line)
    said = [line for line in lines[start:] if "left in the sweep" in line]
    assert len(said) == 3 and all("window" in line for line in said[1:]), said


def test_a_wire_check_prints_its_table_and_stays_out_of_the_sweep() -> None:
    events = session_events()
    wire = ev.WireCeiling(ts=events[-1].ts - 0.5, model="vit", transport="http", batch_size=1, bytes_per_item=602_112,
                          request_bytes=602_112, input_shape=[150_528], peak_ips=900.0, peak_level=8, saturated=True,
                          levels=[ev.WireLevel(level=1, status="stable", throughput_ips=300.0, throughput_rps=300.0,
                                               p50=0.003, p99=0.005),
                                  ev.WireLevel(level=8, status="stable", throughput_ips=900.0, throughput_rps=900.0,
                                               p50=0.008, p99=0.012, client_bound=True)])
    text = printed([*events[:-1], wire, events[-1]])
    lines = text.splitlines()
    title = next(i for i, line in enumerate(lines) if "wire check: the HTTP path caps at 900.0 images/s with 602 KB bodies "
                                                         "(peak at concurrency 8)" in line)
    assert "wire infer/s" in lines[title + 1] and "client-bound" in lines[title + 1]
    assert lines[title + 3].split() == ["8", "stable", "900.0", "8.00", "12.0", "0", "yes"]
    assert len([line for line in lines if line.startswith("level ")]) == 4  # the model's rows only


def test_a_blocked_stdout_never_stalls_the_session_thread() -> None:
    """Nobody reads the pipe (a paused terminal, a full pipe): the bus's publisher, the session's
    thread, still gets every event through; the lines all arrive once the reader comes back."""
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "r", encoding="utf-8")
    writer = os.fdopen(write_fd, "w", encoding="utf-8")
    printer = HeadlessPrinter(Console(file=writer, width=160))
    bus = EventBus()
    bus.subscribe(printer)
    count = 2000  # about 200 kB of lines: several times a pipe's 64 KiB buffer
    published = threading.Event()

    def session_thread() -> None:
        bus.publish(session_events()[0])
        for i in range(count):
            bus.publish(ev.Warning(source="load", message=f"message {i} " + "x" * 80, ts=T0 + i))
        published.set()

    publisher = threading.Thread(target=session_thread, daemon=True)
    publisher.start()
    try:
        # a deadlock check, not a timing: a printer that blocks the bus would block the publisher for good
        assert published.wait(60), "the publisher blocked on the unread pipe"
        got: list[str] = []
        drain = threading.Thread(target=lambda: got.extend(reader))
        drain.start()
        printer.close()
        writer.close()
        drain.join(60)
    finally:
        reader.close()
    assert sum("message" in line for line in got) == count
    assert printer.failure is None


def test_no_best_line_from_unstable_levels_and_the_answer_says_not_decided() -> None:
    from tests.structs import replace

    events = [replace(e, status="unstable") if isinstance(e, ev.LevelResult) else e for e in session_events()]
    text = printed(events).splitlines()
    assert not any(line.startswith("  best:") for line in text)
    assert text[-1] == "answer: not decided: 4 of 4 levels unstable; measure with more windows or trials"
    assert sum(line.startswith("answer: ") for line in text) == 1  # once, the last line
    left = [line for line in text if line.startswith("  left out: concurrency ")]
    assert len(left) == 4 and all(line.endswith(" unstable") for line in left)  # each level's reason, above it
    stable = printed(session_events()).splitlines()
    best = next(line for line in stable if line.startswith("  best:"))
    answer = next(line for line in stable if line.startswith("answer: "))
    level = best.split(" at level ")[1].split(" ")[0]
    assert f"at concurrency {level} " in answer  # the best line and the answer name one level


def test_a_contended_box_ends_with_one_short_answer_line_at_80_columns() -> None:
    """Every level contended: each level's reason stands above, the answer is one short line, once."""
    from tests.structs import replace

    levels = [e for e in session_events() if isinstance(e, ev.LevelResult)]
    share = iter(0.77 + 0.08 * i / max(len(levels) - 1, 1) for i in range(len(levels)))
    events = [replace(e, status="contended", others_cpu=next(share)) if isinstance(e, ev.LevelResult) else e
              for e in session_events()]
    out = io.StringIO()
    printer = HeadlessPrinter(Console(file=out, width=80))
    for event in events:
        printer(event)
    printer.finish(0, None)
    lines = out.getvalue().rstrip().splitlines()
    n = len(levels)
    assert lines[-1] == (f"answer: not decided: {n} of {n} levels contended (others 77–85 % of the CPU); "
                         "measure on a quieter box")
    assert len(lines[-1]) <= 160 and sum(line.startswith("answer: ") for line in lines) == 1
    left = [line for line in lines if line.startswith("  left out: ")]
    assert len(left) == n and all("contended (others took" in line for line in left)
