"""A CPU study (cpu: 1 instance x 2 threads, cpu2: 2 instances x 1 thread) read by its own report
and by compare: the differences the study planned are its variable, named in words, and both
reports give the study's one answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.events import ServerReady
from engine.record.compare import compare, render_compare
from engine.study.figures import study_figures
from engine.study.index import StudyIndex, VariantRun, write_index
from engine.study.study_report import render_study
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.structs import replace
from tui.cli import main


def _config(count: int, threads: int) -> dict:
    return {"name": "vit_tiny", "max_batch_size": 8, "instance_group": [{"kind": "KIND_CPU", "count": count}],
            "parameters": {"arch": {"string_value": "vit_tiny"}, "cpu_threads": {"string_value": str(threads)}}}


@pytest.fixture
def cpu_study(tmp_path: Path) -> Path:
    runs = []
    # cpu2 adds 10 % over cpu: below the bar for an added instance, so the study stops at 1
    for variant, count, threads, capacity, t0 in (("cpu", 1, 2, 100.0, 1_771_169_400.0),
                                                  ("cpu2", 2, 1, 110.0, 1_771_179_400.0)):
        run = SyntheticRun(gpu_model="", gpu_count=0, variant=variant, profile_name="cpu", cost_per_hour=1.0,
                           model="vit_tiny", levels=[1, 2, 4, 8], capacity_per_gpu_ips=capacity, probe=False, t0=t0)
        events = [replace(e, model_config=_config(count, threads)) if isinstance(e, ServerReady) else e
                  for e in synthetic_session(run)]
        path = record_events(tmp_path / f"{variant}.sqlite", events)
        runs.append(VariantRun(variant, path.name, "ok", 0))
    index = StudyIndex(study_id="s", profile="cpu", model="vit_tiny", variants=["cpu", "cpu2"], server="embedded",
                       slo=None, search_steps=0, runs=runs, status="ok")
    path = tmp_path / "s.study.json"
    write_index(index, path)
    return path


def test_the_studys_own_report_does_not_flag_its_variable(cpu_study: Path) -> None:
    text = render_study(study_figures(cpu_study), "md")
    assert "Apples-to-apples" not in text and "string_value" not in text
    assert "stop at 1 cpu instance" in text.lower()


def test_compare_of_the_study_gives_the_studys_answer(cpu_study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(cpu_study)]) == 0
    out = capsys.readouterr().out
    assert "Fix the apples-to-apples" not in out and "string_value" not in out
    assert "The study's verdict: Stop at 1 CPU instance" in out
    assert "threads per CPU instance: the study's variable" in out
    assert "model instances: the study's variable (1 on CPU (cpu (cpu)); 2 on CPU (cpu2 (cpu)))" in out


def test_recordings_outside_a_study_still_flag_a_config_difference(cpu_study: Path) -> None:
    from engine.record.reader import Recording

    recordings = [Recording.open(cpu_study.parent / f"{v}.sqlite") for v in ("cpu", "cpu2")]
    text = render_compare(compare(recordings), "text")
    assert "model config differs in parameters.cpu_threads: 2 (" in text  # the field and its values, not a dict


def test_compare_out_with_gates_puts_the_gate_results_in_the_report(cpu_study: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.md"
    assert main(["compare", str(cpu_study), "--out", str(out), "--format", "md", "--min-throughput", "1000000"]) == 3
    text = out.read_text()
    assert "## Gates" in text and "gate(s) failed (exit code 3)" in text and "min_throughput" in text
    passed = tmp_path / "passed.md"
    assert main(["compare", str(cpu_study), "--out", str(passed), "--format", "md", "--min-throughput", "1"]) == 0
    assert "Every gate passed" in passed.read_text()


def test_export_of_a_study_replaces_its_own_reports(cpu_study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = cpu_study.parent
    for _ in range(2):  # the study wrote its reports; export makes them again
        assert main(["export", str(cpu_study), "--format", "md", "--format", "html"]) == 0
    assert sorted(p.name for p in folder.glob("s*.md")) == ["s.md"]
    assert sorted(p.name for p in folder.glob("s*.html")) == ["s.html"]
    assert not list(folder.glob(".*.tmp")) and not list(folder.glob(".s.new*"))


def test_the_study_replay_announces_its_levels(cpu_study: Path) -> None:
    from engine.study.study_replay import StudyReplaySource

    replay = StudyReplaySource(cpu_study)
    assert replay.levels == [1.0, 2.0, 4.0, 8.0] and replay.mode == "concurrency"


def test_the_study_tables_fit_a_page_and_the_chart_labels_every_planned_level(cpu_study: Path) -> None:
    import re

    from engine.record.doc import Table
    from engine.record.svg import Series, line_chart
    from engine.study.study_report import build_study_doc

    doc = build_study_doc(study_figures(cpu_study))
    tables = [b for b in doc.blocks if isinstance(b, Table)]
    # the widest study table had 16 columns; Saturation and Bottleneck fell off a 1000 px page
    assert max(len(t.header) for t in tables) <= 8
    assert any(t.header == ["Config", "Saturation", "Bottleneck"] for t in tables)
    # an SLO search adds levels between the planned ones: every planned level keeps its label
    levels = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]
    chart = line_chart("t", [Series("a", [(x, float(x)) for x in levels])], "concurrency", "images/s", log2_x=True)
    labels = set(re.findall(r'text-anchor="middle">([^<]+)</text>', chart))
    assert {"1", "2", "4", "8", "16", "32", "64", "128"} <= labels
