import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.events import (
    GpuReading,
    GpuSample,
    LatencyStats,
    LevelResult,
    LevelStarted,
    ServerBreakdown,
    SessionEnded,
    SessionStarted,
    event_from_dict,
)
from engine.profiles import Hardware, Load, Profile
from engine.record.export_csv import COLUMNS
from engine.record.exporters import export
from engine.record.reader import Recording
from tests.engine.record.synthetic_recordings import record_events
from tests.structs import replace

PERF_ANALYZER_HEADER = (
    "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
    "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency,"
    "Avg latency,request/response,response wait"
)


def _level(level: float, index: int, ips: float, status: str = "stable") -> LevelResult:
    ok = status != "failed"
    return LevelResult(
        ts=1000.0 + 10 * index, mode="concurrency", level=level, index=index, status=status, batch_size=1, windows=3,
        merged_windows=3 if ok else 0, requests=300 if ok else 0, errors=0 if ok else 5, throughput_rps=ips,
        throughput_ips=ips,
        latency=LatencyStats(count=300, mean=0.020, p50=0.0185, p90=0.0241, p95=0.02625, p99=0.0312)
        if ok else LatencyStats(count=0),
        server=ServerBreakdown(request_count=300, inference_count=300, execution_count=150, queue=0.0015,
                               compute_input=0.0009, compute_infer=0.0162, compute_output=0.0009,
                               server_total=0.0195, avg_batch_size=2.0, client_minus_server=0.0005) if ok else None,
    )


@pytest.fixture()
def hand_recording(tmp_path: Path) -> Path:
    profile = Profile(name="hand", hardware=Hardware(gpu_model="A100", gpu_count=1, cost_per_hour=3.6),
                      load=Load(concurrency=[1, 8, 64, 128]))
    events = [SessionStarted(ts=990.0, session_id="s", profile_name="hand <b>", profile=profile.to_dict(), mode="sweep")]
    for index, (level, ips, status) in enumerate([(64, 900.0, "unstable"), (1, 50.0, "stable"), (128, 0.0, "failed"),
                                                  (8, 400.0, "stable")]):
        events.append(LevelStarted(ts=995.0 + 10 * index, mode="concurrency", level=level, index=index, total=4))
        events.append(_level(level, index, ips, status))
    events.append(SessionEnded(ts=1100.0, status="ok"))
    return record_events(tmp_path / "hand.sqlite", events)


def test_csv_lines_up_with_perf_analyzer(hand_recording: Path, tmp_path: Path) -> None:
    with Recording.open(hand_recording) as r:
        path = export(r, "csv", tmp_path / "out")
    text = path.read_text()
    assert text.splitlines()[0] == PERF_ANALYZER_HEADER == ",".join(["Concurrency", *COLUMNS])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [row["Concurrency"] for row in rows] == ["1", "8", "64"]  # sorted; the failed level has no row
    row = rows[1]
    # microseconds, as perf_analyzer writes them; network = 20000 - 1500 - 900 - 16200 - 900 = 500
    assert (row["Inferences/Second"], row["Server Queue"], row["Server Compute Input"], row["Server Compute Infer"],
            row["Server Compute Output"], row["Network+Server Send/Recv"]) == ("400.00", "1500", "900", "16200", "900", "500")
    assert (row["p50 latency"], row["p90 latency"], row["p95 latency"], row["p99 latency"], row["Avg latency"]) == (
        "18500", "24100", "26250", "31200", "20000")
    # what we do not measure stays empty rather than invented
    assert row["Client Send"] == row["Client Recv"] == row["request/response"] == row["response wait"] == ""


def test_csv_adds_perf_analyzer_gpu_columns_when_there_is_telemetry(tmp_path: Path) -> None:
    events = [LevelStarted(ts=10.0, mode="concurrency", level=4, index=0, total=1)]
    for t, util in ((11.0, 50.0), (12.0, 70.0)):
        events.append(GpuSample(ts=t, source="nvml", interval_s=1.0, gpus=[
            GpuReading(uuid="GPU-a", index=0, source="nvml", util_gpu=util, power_w=200.0 + util,
                       mem_used=1000 + int(util), mem_total=16000)]))
    events.append(replace(_level(4, 0, 100.0), ts=13.0))
    path = record_events(tmp_path / "g.sqlite", events)
    with Recording.open(path) as r:
        rows = list(csv.reader(io.StringIO(export(r, "csv", tmp_path).read_text())))
    assert rows[0][-4:] == ["Avg GPU Utilization", "Avg GPU Power Usage", "Max GPU Memory Usage", "Total GPU Memory"]
    # mean of 50 % and 70 % = 0.6 as a fraction; power mean 260 W; memory max 1070 B of 16000 B
    assert rows[1][-4:] == ["GPU-a:0.6;", "GPU-a:260.0;", "GPU-a:1070;", "GPU-a:16000;"]


def test_json_is_complete(recording_4x: Path, tmp_path: Path) -> None:
    with Recording.open(recording_4x) as r:
        path = export(r, "json", tmp_path)
        doc = json.loads(path.read_text())
        assert doc["metadata"] == r.metadata
        assert [event_from_dict(e) for e in doc["events"]] == list(r.events())


def test_markdown_report(recording_4x: Path, tmp_path: Path) -> None:
    with Recording.open(recording_4x) as r:
        text = export(r, "md", tmp_path, name="report.md").read_text()
    for heading in ("## Setup", "## Throughput and latency per level", "## Queue vs compute", "## Saturation point",
                    "## Scaling efficiency", "## Cost per 1000 images", "## Bottlenecks found", "## Recommendation"):
        assert heading in text
    assert "random weights" in text and "do not depend on weight values" in text
    assert "saturates at concurrency 16" in text  # 600 images/s from 16 on
    # $2/hr at 600 images/s: 2 / (600 x 3600) x 1000 = $0.000926
    assert "$0.000926 per 1000 images" in text
    assert "Verdict: compute" in text
    # the charts are the HTML report's; the Markdown names each where it stands
    assert "*Chart in the HTML report: Latency vs throughput (the knee).*" in text
    assert text.index("Chart in the HTML report: Throughput per window") < text.index("## Scaling efficiency")


def test_html_report_is_self_contained(hand_recording: Path, recording_4x: Path, tmp_path: Path) -> None:
    for source in (recording_4x, hand_recording):
        with Recording.open(source) as r:
            page = export(r, "html", tmp_path).read_text()
        assert page.startswith("<!DOCTYPE html>")
        for fetch in ("<script", "<link", "src=", "href=", "url(", "@import"):
            assert fetch not in page
        assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}  # a name, never fetched
        for svg in re.findall(r"<svg.*?</svg>", page, flags=re.S):
            ET.fromstring(svg)  # every chart is well-formed
    assert "hand &lt;b&gt;" in page and "hand <b>" not in page  # text is escaped
    with Recording.open(recording_4x) as r:
        page = export(r, "html", tmp_path, name="full.html").read_text()
    titles = re.findall(r"<svg[^>]*><title>([^<]*)</title>", page)
    assert titles == ["Throughput vs load", "Latency percentiles", "Latency vs throughput (the knee)",
                      "Where a request&#x27;s time goes", "Throughput per window", "Latency per window",
                      "Training probe: scaling efficiency", "Training probe: samples/s (95 % CI)",
                      "GPU utilization over time", "GPU power over time", "GPU memory used over time"]


def test_exports_stay_inside_the_chosen_folder_and_never_overwrite(recording_4x: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with Recording.open(recording_4x) as r:
        for name in ("../escape.md", "/tmp/escape.md", "a/../../escape.md"):
            with pytest.raises(UserError):
                export(r, "md", out, name=name)
        first = export(r, "md", out)
        second = export(r, "md", out)  # the default name is made unique
        assert first.name == "rtx4080_4gpu.md" and second.name == "rtx4080_4gpu_2.md"
        first.write_text("edited by hand")
        with pytest.raises(UserError, match="already exists"):
            export(r, "md", out, name=first.name)
        with pytest.raises(UserError, match="unknown export format"):
            export(r, "pdf", out)
    assert first.read_text() == "edited by hand"
    assert not (tmp_path / "escape.md").exists() and not Path("/tmp/escape.md").exists()
    assert recording_4x.exists()


def test_a_cpu_only_run_is_not_told_the_gpus_are_the_limit(tmp_path: Path) -> None:
    """The compute verdict on a CPU-only run never recommends more or faster GPUs."""
    from engine.profiles import Model
    from engine.record.doc import to_markdown
    from engine.record.findings import analyze
    from engine.record.recording_report import build_report

    profile = Profile(name="local", hardware=Hardware(gpu_count=0), model=Model(name="vit_tiny", variant="cpu"),
                      load=Load(concurrency=[1, 8]))
    events = [SessionStarted(ts=990.0, session_id="s", profile_name="local", profile=profile.to_dict(), mode="sweep")]
    for index, (level, ips) in enumerate([(1, 50.0), (8, 51.0)]):
        events.append(LevelStarted(ts=995.0 + 10 * index, mode="concurrency", level=level, index=index, total=2))
        events.append(_level(level, index, ips))
    events.append(SessionEnded(ts=1100.0, status="ok"))
    with Recording.open(record_events(tmp_path / "cpu.sqlite", events)) as rec:
        summary = rec.summary()
    findings = analyze(summary)
    assert summary.gpus_in_config is None and findings.verdict.kind == "compute"
    text = to_markdown(build_report(summary, findings))
    assert "GPUs are the limit" not in text and "more or faster GPUs" not in text
    assert "Model execution on the CPU is the limit" in text


def _two_sweeps(tmp_path: Path) -> Path:
    """The issue's session: a full sweep over 1, 4, 8, then `s` again and `x` after level 1."""
    from engine.events import SweepFinished

    profile = Profile(name="hand", hardware=Hardware(gpu_model="A100", gpu_count=1, cost_per_hour=3.6),
                      load=Load(concurrency=[1, 4, 8]))
    events: list = [SessionStarted(ts=990.0, session_id="s", profile_name="hand", profile=profile.to_dict(),
                                   mode="sweep")]
    t = 1000.0
    for sweep in ([(1, 100.0), (4, 380.0), (8, 400.0)], [(1, 111.0)]):
        for index, (level, ips) in enumerate(sweep):
            events.append(LevelStarted(ts=t, mode="concurrency", level=level, index=index, total=3))
            events.append(replace(_level(level, index, ips), ts=t + 5))
            t += 10
        events.append(SweepFinished(ts=t, levels=len(sweep), stable=len(sweep), failed=0))
    events.append(SessionEnded(ts=t + 10, status="ok"))
    return record_events(tmp_path / "two.sqlite", events)


def test_two_sweeps_stay_apart_in_every_export(tmp_path: Path) -> None:
    """Two sweeps of one session are exported apart: never one table mixing their levels, nor a
    saturation point computed from the mix."""
    from engine.record.findings import analyze

    path = _two_sweeps(tmp_path)
    with Recording.open(path) as rec:
        summary = rec.summary()
        assert [(s.number, s.measured, s.complete) for s in summary.sweeps] == [(1, 3, True), (2, 1, False)]
        assert summary.main_sweep == 1
        findings = analyze(summary)
        assert [(p.level, p.throughput) for p in findings.points] == [(1, 100.0), (4, 380.0), (8, 400.0)]
        assert [(p.level, p.throughput) for p in analyze(summary, 2).points] == [(1, 111.0)]
        assert findings.saturation.level == 4
        rows = list(csv.reader(io.StringIO((export(rec, "csv", tmp_path / "out")).read_text())))
        md = export(rec, "md", tmp_path / "out").read_text()
    assert rows[0][-1] == "Sweep"
    assert [(r[0], r[1], r[-1]) for r in rows[1:]] == [("1", "100.00", "1"), ("4", "380.00", "1"), ("8", "400.00", "1"),
                                                        ("1", "111.00", "2")]
    assert "## Throughput and latency per level (sweep 1 of 2, complete)" in md
    assert "## Throughput and latency per level (sweep 2 of 2, stopped after 1 of 3 levels)" in md
    assert "## Recommendation (sweep 1 of 2, complete)" in md
    first, second = md.split("(sweep 2 of 2", 1)
    assert "| 1 | stable | 100.0 |" in first and "111.0" not in first.split("## Recommendation")[0]
    assert "| 1 | stable | 111.0 |" in second


def test_one_sweep_reports_carry_no_sweep_column(hand_recording: Path, tmp_path: Path) -> None:
    with Recording.open(hand_recording) as rec:
        text = export(rec, "csv", tmp_path).read_text()
        md = export(rec, "md", tmp_path).read_text()
    assert "Sweep" not in text.splitlines()[0] and "sweep 1 of" not in md


def test_the_cli_and_the_export_dialog_read_the_one_exporter_registry() -> None:
    from engine.record.exporters import EXPORTERS
    from tui.cli import build_parser
    from tui.screens.dialogs import EXPORT_FORMATS as dialog_formats

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    export_format = next(a for a in sub.choices["export"]._actions if a.dest == "format")
    cli_formats = tuple(export_format.choices)
    assert cli_formats == tuple(EXPORTERS) == ("json", "csv", "md", "html")
    assert [name for name, _ in dialog_formats] == list(EXPORTERS)
    assert all(text == EXPORTERS[name].description for name, text in dialog_formats)
