"""The verdicts of a report: every figure drawn from an unstable level says so where it is drawn,
a sweep with no stable level says so in its first lines, and a full shared host's CPU is read
with each share (the server's, ours, others')."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.events import Event, LevelResult
from engine.record.doc import to_markdown
from engine.record.findings import analyze
from engine.record.reader import Recording
from engine.record.recording_report import build_report
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.structs import replace


def _unstable(events: list[Event], keep_stable: set[int] = frozenset()) -> list[Event]:  # type: ignore[assignment]
    return [replace(e, status="unstable") if isinstance(e, LevelResult) and e.level not in keep_stable
            else e for e in events]


@pytest.fixture(scope="module")
def no_stable_level(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = SyntheticRun(variant="1x", gpu_count=1, probe=False, capacity_per_gpu_ips=80.0)
    return record_events(tmp_path_factory.mktemp("unstable") / "run.sqlite", _unstable(synthetic_session(run)))


def test_no_stable_level_is_said_first_and_at_each_figure(no_stable_level: Path) -> None:
    with Recording.open(no_stable_level) as rec:
        summary = rec.summary()
    findings = analyze(summary)
    text = to_markdown(build_report(summary, findings))
    head = "\n".join(text.splitlines()[:8])
    # the answer first: no figure is drawn from noise
    assert "answer: not decided: 7 of 7 levels unstable; measure with more windows or trials" in head
    assert "no level was stable" in head.lower() and "0 of 7" in head
    assert findings.peak is None and findings.saturation is None and findings.cost_per_1000_at_peak is None
    assert findings.recommendation[0].startswith("Measure again before sizing: not decided")
    # every level produced figures: the saturation point is missing for want of a sound level
    assert "No sound level, so no saturation point: concurrency 1 unstable" in text
    assert "No level produced a result" not in text


def test_a_comparison_of_runs_with_no_sound_level_says_so(no_stable_level: Path, tmp_path: Path) -> None:
    from engine.record.compare import build_compare_doc, compare

    run = SyntheticRun(variant="2x", gpu_count=2, probe=False, capacity_per_gpu_ips=80.0)
    other = record_events(tmp_path / "run2.sqlite", _unstable(synthetic_session(run)))
    with Recording.open(no_stable_level) as a, Recording.open(other) as b:
        text = to_markdown(build_compare_doc(compare([a, b])))
    assert "No sound level in any run" in text and "No run produced a result" not in text


def test_a_stable_saturation_level_is_not_marked(tmp_path: Path) -> None:
    run = SyntheticRun(variant="1x", gpu_count=1, probe=False, capacity_per_gpu_ips=80.0)
    # only the levels above concurrency 8 are unstable: the saturation point (4) has a stable
    # level above it (8), so it is reached on sound levels
    path = record_events(tmp_path / "run.sqlite", _unstable(synthetic_session(run), keep_stable={1, 4, 8}))
    with Recording.open(path) as rec:
        findings = analyze(rec.summary())
    assert findings.saturation is not None and findings.saturation.reached
    assert "unstable" not in findings.saturation.describe()
    serve = next(line for line in findings.recommendation if line.startswith("Serve at"))
    assert "unstable" not in serve
    text = to_markdown(build_report(findings.summary, findings))
    assert "no level was stable" not in text.lower()


def test_the_end_line_says_when_no_level_was_stable() -> None:
    from engine.analysis.stability import none_stable

    assert none_stable(["unstable"] * 7).startswith("no level was stable (0 of 7)")
    assert none_stable(["unstable", "stable", "failed"]) == ""
    assert none_stable(["failed", "failed"]) == ""  # a failed sweep says that instead
    assert none_stable([]) == ""


def test_a_recording_of_a_full_shared_host_reads_host_cpu_with_each_share(tmp_path: Path) -> None:
    from engine.events import GpuSample, HostSample

    run = SyntheticRun(variant="1x", gpu_count=1, probe=False, capacity_per_gpu_ips=80.0, client_bound_from=8)
    # the embedded server's processes on 19.2 of the 32 cores (60 %), ours on 8 (25 %), 5 % others
    events = [replace(e, cpu_percent=90.0, own_cpu_percent=800.0, server_cpu_percent=1920.0)
              if isinstance(e, HostSample) else e
              for e in synthetic_session(run) if not isinstance(e, GpuSample)]
    with Recording.open(record_events(tmp_path / "run.sqlite", events)) as rec:
        findings = analyze(rec.summary())
    assert findings.levels[-1].server_cpu_percent == pytest.approx(1920.0)
    assert findings.verdict.kind == "host-cpu"
    assert "server's processes 60%, our load generator 25%, others 5.0%" in findings.verdict.evidence[0]
    assert any("another machine" in line for line in findings.recommendation)


def test_a_recording_of_a_host_full_of_other_work_names_it_and_offers_a_quieter_box(tmp_path: Path) -> None:
    from engine.events import GpuSample, HostSample

    run = SyntheticRun(variant="1x", gpu_count=1, probe=False, capacity_per_gpu_ips=80.0, client_bound_from=8)
    # the newcomer's box: 95 % busy, the server's processes on 2.56 of the 32 cores (8 %), ours on
    # 0.96 (3 %), others 84 %
    events = [replace(e, cpu_percent=95.0, own_cpu_percent=96.0, server_cpu_percent=256.0)
              if isinstance(e, HostSample) else e
              for e in synthetic_session(run) if not isinstance(e, GpuSample)]
    with Recording.open(record_events(tmp_path / "run.sqlite", events)) as rec:
        findings = analyze(rec.summary())
    v = findings.verdict
    assert v.kind == "host-cpu"
    assert "server's processes 8.0%, our load generator 3.0%, others 84%" in v.evidence[0]
    assert "other processes on this host" in v.summary and "others 84%" in v.summary
    assert "use them all" not in v.summary
    advice = " ".join(findings.recommendation)
    assert "quieter box" in advice and "Other processes on this host took most of its busy CPU" in advice
    for remedy in ("shared memory", "system_shm", "another machine"):  # the answer to the wrong problem
        assert remedy not in advice and remedy not in " ".join(v.evidence), remedy
    text = to_markdown(build_report(findings.summary, findings))
    assert "taken mostly by other processes on this host" in text and "use them all" not in text
