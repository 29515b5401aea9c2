"""A decoupled model's server time is not split into queue, compute and "outside the server"
(issue 54, item 3), against the real embedded Triton serving toy_llm: Triton's statistics time
the model's execute calls, its per-response statistics stay empty, so every surface (the level's
figures, the headless table, the TUI's level detail and timeline, the report) says "not measured"
instead of putting the stream's latency outside the server."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from rich.console import Console

from engine.analysis.stream_split import DECOUPLED_SPLIT
from engine.events import LevelResult, ServerReady
from engine.record.exporters import export
from engine.record.reader import Recording
from engine.triton.target import Target, describe_target
from tests.engine.load.conftest import quick_load, sweep
from tui.headless import HeadlessPrinter
from tui.level_detail import render_level
from tui.state import SessionState
from tui.widgets.timeline import breakdown_line, render_timeline

pytestmark = [pytest.mark.server, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]
PROMPTS = ROOT / "tests" / "data" / "toy_llm_prompts.json"


@pytest.fixture(scope="module")
def streamed(tmp_path_factory):
    """A grpc_stream sweep of toy_llm, with the server's statistics read after it."""
    from engine.server.embedded import EmbeddedServer

    with EmbeddedServer(model="toy_llm", variant="cpu", log_dir=tmp_path_factory.mktemp("triton-split")) as srv:
        target = Target(srv.http_url, "toy_llm")
        info = asyncio.run(describe_target(target))
        load = quick_load(transport="grpc_stream", input_data=str(PROMPTS), min_window_requests=10,
                          concurrency=[2], stability_percent=100)
        for _ in range(4):  # a busy box can answer the statistics too late: said, then measured again
            results, events = asyncio.run(sweep(target, info, load))
            if results[0].server is not None and any(e.kind == "window" and e.server is not None for e in events):
                break
            assert any(e.kind == "warning" and e.key.startswith("late-stats") for e in events), \
                "no breakdown, and none said why"
        assert results[0].server is not None, "the statistics came late in every one of 4 sweeps"
        with urllib.request.urlopen(f"{srv.http_url}/v2/models/toy_llm/stats", timeout=10) as reply:
            stats = json.load(reply)
        ready = ServerReady(http_url=srv.http_url, metrics_url=None, embedded=True, model="toy_llm",
                            model_config=info.model_config, transport="grpc_stream")
        yield results, [ready, *events], stats


def test_triton_gives_no_per_response_statistics_for_the_stream(streamed) -> None:
    # the premise: were response_stats filled, the split could be built from them (stream_split.py)
    _, _, stats = streamed
    (model,) = stats["model_stats"]
    assert model["inference_stats"]["success"]["count"] > 0
    assert not model.get("response_stats")


def test_a_streams_level_has_its_counts_and_no_split(streamed) -> None:
    results, events, _ = streamed
    (result,) = results
    server = result.server
    assert server is not None and server.request_count > 0
    # a busy box can read the statistics between a request and its execution's count: then the
    # level has requests but no executions, and no batch size (not measured, never 0)
    assert server.avg_batch_size is None or server.avg_batch_size >= 1.0
    assert server.no_split == DECOUPLED_SPLIT
    assert (server.queue, server.compute_infer, server.server_total, server.client_minus_server) == (None,) * 4
    windows = [e for e in events if e.kind == "window" and e.server is not None]
    assert windows and all(w.server.no_split == DECOUPLED_SPLIT and w.server.queue is None for w in windows)


def test_the_headless_table_and_the_tui_say_not_measured(streamed) -> None:
    _, events, _ = streamed
    out = io.StringIO()
    printer = HeadlessPrinter(Console(file=out, width=200))
    for event in events:
        printer(event)
    printer.finish(0, None)  # its writer thread done
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if line.startswith("sweep "))
    assert "server split" in header and "queue ms" not in header and "compute ms" not in header
    assert lines[lines.index(header) + 1].strip().startswith(DECOUPLED_SPLIT)
    rows = [line for line in lines if line.startswith("level ")]  # a busy box may measure the level again
    assert rows and all("not measured" in row for row in rows)
    state = SessionState()
    state.apply_all(events)
    detail = Console(file=io.StringIO(), width=200, record=True)
    detail.print(render_level(state, list(state.levels.values())[-1], 200))  # the level's last measurement
    text = detail.export_text()
    assert DECOUPLED_SPLIT in text and "outside server" not in text
    # the line reads the last window; on a busy box that one may have read no statistics
    last = max(i for i, e in enumerate(events) if e.kind == "window" and e.server is not None)
    upto = SessionState()
    upto.apply_all(events[:last + 1])
    assert breakdown_line(upto, 200).plain.strip() == DECOUPLED_SPLIT
    timeline = render_timeline(list(state.timeline), state, 100).plain
    assert "tok/s" in timeline and "queue ms" not in timeline and "compute ms" not in timeline


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", "--headless", "--no-check", "--set", "model.name=toy_llm",
                           "--set", "load.window_ms=300", "--set", "load.warmup_s=0.3", "--set", "load.max_trials=1",
                           "--set", "load.contended_percent=100", *args],  # the box-noise rule off (tests/conftest.py)
                          cwd=cwd, capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(ROOT),
                                                                                      "PATH": "/usr/bin:/bin"})


def test_a_recorded_stream_run_says_not_measured_in_its_log_and_report(tmp_path: Path) -> None:
    proc = _cli("--record", "--output", str(tmp_path), "--set", "load.transport=grpc_stream",
                "--set", "load.concurrency=[2]", "--input-data", str(PROMPTS), "--set", "load.stability_percent=100",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "server split not measured for a decoupled model" in proc.stdout
    assert "load over grpc_stream" in proc.stdout and "concurrency sweep on toy_llm over grpc_stream" in proc.stdout
    (path,) = tmp_path.glob("*.sqlite")
    with Recording.open(path) as rec:
        report = Path(export(rec, "md", tmp_path)).read_text()
        levels = [e for e in rec.events() if isinstance(e, LevelResult)]
    assert levels and all(e.server is not None and e.server.no_split == DECOUPLED_SPLIT for e in levels)
    assert f"{DECOUPLED_SPLIT}: Triton's queue and compute statistics" in report
    assert "Outside server ms" not in report and "queue 0" not in report
