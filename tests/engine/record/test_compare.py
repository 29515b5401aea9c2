import re
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.record.compare import compare, render_compare
from engine.record.reader import Recording
from tests.engine.record.synthetic_recordings import SyntheticRun, make_recording
from tests.structs import replace

# Synthetic servers: throughput = min(c / 20 ms, GPUs x capacity per GPU), levels 1..128
RUNS = {
    "1x": SyntheticRun(variant="1x", gpu_count=1, profile_name="1x_rtx4080", cost_per_hour=0.5,
                       capacity_per_gpu_ips=200.0),
    "2x": SyntheticRun(variant="2x", gpu_count=4, profile_name="4x_rtx4080", cost_per_hour=2.0,
                       capacity_per_gpu_ips=180.0),
    "4x": SyntheticRun(variant="4x", gpu_count=4, profile_name="4x_rtx4080", cost_per_hour=2.0,
                       capacity_per_gpu_ips=150.0),
}


@pytest.fixture(scope="module")
def scaling_study(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("study")
    return [make_recording(folder, f"{name}.sqlite", run) for name, run in RUNS.items()]


def _open(paths: list[Path]) -> list[Recording]:
    return [Recording.open(p) for p in paths]


@pytest.mark.slow
def test_scaling_cost_and_saturation(scaling_study: list[Path]) -> None:
    c = compare(_open(list(reversed(scaling_study))))
    by_n = {r.n: r for r in c.runs}
    assert [r.n for r in c.runs] == [1, 2, 4]  # sorted by GPU count whatever the input order
    one, two, four = by_n[1], by_n[2], by_n[4]
    assert (one.findings.peak.throughput, two.findings.peak.throughput, four.findings.peak.throughput) == (200, 360, 600)
    # efficiency = peak_N / (N x peak_1): 360 / (2 x 200) = 0.9, 600 / (4 x 200) = 0.75
    assert two.scaling.efficiency == pytest.approx(0.9) and four.scaling.efficiency == pytest.approx(0.75)
    assert two.scaling.speedup == pytest.approx(1.8) and four.scaling.speedup == pytest.approx(3.0)
    assert two.base_label == one.label == four.base_label
    # $/1000 = $/hr / (images/s x 3600) x 1000
    assert one.findings.cost_per_1000_at_peak == pytest.approx(0.5 / (200 * 3600) * 1000)
    assert four.findings.cost_per_1000_at_peak == pytest.approx(2.0 / (600 * 3600) * 1000)
    # saturation: 1x reaches 200 at 4, 2x 360 at 8 (4 gives 200), 4x 600 at 16 (8 gives 400)
    assert [r.findings.saturation.level for r in c.runs] == [4, 8, 16]
    assert c.lowest_efficiency == pytest.approx(0.75)
    assert c.mismatches == []
    assert any("uses 2 of the box's 4 GPUs" in n for n in c.notes)
    assert {r.findings.verdict.kind for r in c.runs} == {"compute"}


def test_apples_to_apples_warnings_are_precise(scaling_study: list[Path], tmp_path: Path) -> None:
    odd = make_recording(tmp_path, "a100.sqlite", SyntheticRun(
        gpu_model="A100", variant="1x", gpu_count=1, profile_name="1x_a100", model="vit_tiny", batch_size=2,
        levels=[1, 4, 8], max_batch_size=32))
    c = compare(_open([scaling_study[0], odd]))
    text = "\n".join(c.mismatches)
    # runs are listed by GPU model, then GPU count: A100 before RTX 4080
    assert "model differs: vit_tiny (1x A100 (1x_a100)); openclip_vit_b32 (1x RTX 4080 (1x_rtx4080))" in text
    assert "batch size differs" in text
    assert "model config differs in max_batch_size: " in text and "32 (1x A100" in text and "64 (1x RTX 4080" in text
    assert "concurrency levels differ: 1, 4, 8 (1x A100 (1x_a100))" in text
    assert "instance_group" not in text  # differs between variants by design
    assert all(r.base_label == r.label for r in c.runs)  # each GPU model is its own 1x base


def test_renderings(scaling_study: list[Path]) -> None:
    c = compare(_open(scaling_study))
    text = render_compare(c, "text")
    md = render_compare(c, "md")
    page = render_compare(c, "html")
    for out in (text, md, page):
        for r in c.runs:
            assert r.label in out
        assert "75%" in out and "90%" in out
    assert "| Run | GPUs |" in md
    assert "<script" not in page and "src=" not in page and "href=" not in page
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}
    assert len(re.findall(r"<svg", page)) == 4  # throughput, p99, efficiency, cost
    with pytest.raises(UserError):
        render_compare(c, "pdf")


def test_needs_two_recordings(scaling_study: list[Path]) -> None:
    with pytest.raises(UserError, match="two or more"):
        compare(_open(scaling_study[:1]))


def test_export_compare_follows_the_path_rules(scaling_study: list[Path], tmp_path: Path) -> None:
    from engine.record.exporters import export_compare

    c = compare(_open(scaling_study))
    first = export_compare(c, "md", tmp_path)
    second = export_compare(c, "html", tmp_path, name="study")
    assert (first.name, second.name) == ("comparison.md", "study.html")
    assert "## Summary" in first.read_text() and second.read_text().startswith("<!DOCTYPE html>")
    with pytest.raises(UserError):
        export_compare(c, "md", tmp_path, name="../out.md")
    with pytest.raises(UserError, match="already exists"):
        export_compare(c, "html", tmp_path, name="study.html")


def test_comparison_gates(scaling_study: list[Path]) -> None:
    from engine.analysis.gates import evaluate_comparison_gates
    from engine.profiles import Gates

    c = compare(_open(scaling_study))
    assert evaluate_comparison_gates(Gates(min_efficiency=0.7, min_throughput=150), c) == []
    failures = evaluate_comparison_gates(Gates(min_efficiency=0.8, min_throughput=300), c)
    assert failures == [
        "1x RTX 4080 (1x_rtx4080): min_throughput: best 200/s (at 4) < 300/s",
        "4x RTX 4080 (4x_rtx4080): min_efficiency: 0.750 < 0.8",
    ]


def _hand_sweep(path: Path, levels: list[tuple[float, float, str]], sweeps: int = 1) -> Path:
    """A recording of ``sweeps`` sweeps over (level, images/s, status), written by the real Recorder."""
    from engine.events import (
        LatencyStats,
        LevelResult,
        LevelStarted,
        SessionEnded,
        SessionStarted,
        SweepFinished,
    )
    from engine.profiles import Hardware, Load, Model, Profile
    from tests.engine.record.synthetic_recordings import record_events

    profile = Profile(name="hand", hardware=Hardware(gpu_model="A100", gpu_count=1), model=Model(variant="1x"),
                      load=Load(concurrency=[int(lv) for lv, _, _ in levels]))
    events: list = [SessionStarted(ts=900.0, session_id="s", profile_name="hand", profile=profile.to_dict(),
                                   mode="sweep")]
    t = 1000.0
    for sweep in range(sweeps):
        for index, (level, ips, status) in enumerate(levels):
            ips = ips * (1 + sweep)  # each sweep its own figures: a mix would show
            events.append(LevelStarted(ts=t, mode="concurrency", level=level, index=index, total=len(levels)))
            events.append(LevelResult(ts=t + 5, mode="concurrency", level=level, index=index, status=status,
                                      batch_size=1, windows=3, merged_windows=3, requests=300, errors=0,
                                      throughput_rps=ips, throughput_ips=ips,
                                      latency=LatencyStats(count=300, mean=0.02, p50=0.02, p90=0.03, p95=0.03,
                                                           p99=0.04)))
            t += 10
        events.append(SweepFinished(ts=t, levels=len(levels), stable=len(levels), failed=0))
        t += 10
    events.append(SessionEnded(ts=t, status="ok"))
    return record_events(path, events)


def test_compare_peaks_rest_on_sound_levels_and_name_those_left_out(tmp_path: Path) -> None:
    """A peak is never taken from an unstable level: the run's peak is its best stable level,
    and a note names the level left out; the per-level table still shows it, marked."""
    steady = _hand_sweep(tmp_path / "a.sqlite", [(1, 100.0, "stable"), (8, 400.0, "stable")])
    shaky = _hand_sweep(tmp_path / "b.sqlite", [(1, 100.0, "stable"), (8, 500.0, "unstable")])
    c = compare(_open([steady, shaky]))
    text = render_compare(c, "md")
    header = next(line for line in text.splitlines() if line.startswith("| Run"))
    assert "Stability" in header
    (shaky_run,) = [r for r in c.runs if r.findings.points[-1].status == "unstable"]
    assert shaky_run.findings.peak is not None and shaky_run.findings.peak.throughput == 100.0
    assert any("left out: concurrency 8 unstable" in n for n in c.notes)
    assert "500.0 (unstable)" in text  # the per-level table marks it


def test_compare_uses_one_sweep_and_says_which(tmp_path: Path) -> None:
    """A session with two sweeps is compared by one of them, named, never a mix."""
    once = _hand_sweep(tmp_path / "a.sqlite", [(1, 100.0, "stable"), (8, 400.0, "stable")])
    twice = _hand_sweep(tmp_path / "b.sqlite", [(1, 100.0, "stable"), (8, 400.0, "stable")], sweeps=2)
    c = compare(_open([once, twice]))
    (two,) = [r for r in c.runs if len(r.summary.sweeps) == 2]
    assert [(p.level, p.throughput) for p in two.findings.points] == [(1, 200.0), (8, 800.0)]  # sweep 2's own
    assert any("2 sweeps recorded; compared: sweep 2 of 2, complete" in n for n in c.notes)


def test_runs_over_different_transports_are_compared_with_a_warning(tmp_path: Path) -> None:
    from engine.record.summary import summarize

    http = make_recording(tmp_path, "http.sqlite", SyntheticRun(variant="1x", gpu_count=1, profile_name="1x_rtx4080"))
    shm = make_recording(tmp_path, "shm.sqlite", SyntheticRun(variant="1x", gpu_count=1, profile_name="1x_rtx4080",
                                                            transport="cuda_shm"))
    with Recording.open(shm) as rec:
        assert summarize(rec).transport == "cuda_shm"
    c = compare(_open([http, shm]))
    notes = "\n".join(c.notes)
    assert "transport differs: " in notes and "cuda_shm" in notes and "http" in notes
    assert not any("transport" in m for m in c.mismatches)  # comparing the paths is a purpose, not an error
    from engine.record.exporters import export

    with Recording.open(shm) as rec:
        report = Path(export(rec, "md", tmp_path)).read_text()
    assert "inputs by CUDA shared memory" in report


def test_a_study_comparison_prices_part_of_the_box_pro_rata(scaling_study: list[Path]) -> None:
    """The 2x run used 2 of a 4-GPU box at $2/hr: as a study's own table does, its comparison
    prices it at $1/hr (the same figure in both reports); a --cost given wins; a run on the
    whole box keeps the box's price."""
    c = compare(_open(scaling_study), pro_rata=True)
    by_n = {r.n: r for r in c.runs}
    assert by_n[2].summary.cost_per_hour == pytest.approx(1.0) and by_n[4].summary.cost_per_hour == pytest.approx(2.0)
    assert by_n[2].findings.cost_per_1000_at_peak == pytest.approx(1.0 / (360 * 3600) * 1000)
    assert any("2 of the box's 4 GPUs at $2/hr, pro rata" in n for n in c.notes)
    c = compare(_open(scaling_study), costs={2: 1.5}, pro_rata=True)
    assert {r.n: r for r in c.runs}[2].summary.cost_per_hour == pytest.approx(1.5)
    assert any("$1.5/hr for 2 GPU(s) (given on the command line)" in n for n in c.notes)


@pytest.mark.slow
def test_runs_with_and_without_mps_are_compared_with_a_warning_and_the_report_says_which(tmp_path: Path) -> None:
    from engine.record.summary import summarize

    shared = make_recording(tmp_path, "mps.sqlite", SyntheticRun(variant="1x", gpu_count=1, profile_name="1x_rtx4080",
                                                               mps=True))
    sliced = make_recording(tmp_path, "nomps.sqlite", SyntheticRun(variant="1x", gpu_count=1, profile_name="1x_rtx4080",
                                                                 mps=False))
    with Recording.open(shared) as rec:
        assert summarize(rec).mps is True
    c = compare(_open([shared, sliced]))
    notes = "\n".join(c.notes)
    assert "GPU sharing differs: MPS (" in notes and "no MPS or not known (" in notes
    assert not any("MPS" in m for m in c.mismatches)
    same = compare(_open([shared, make_recording(tmp_path, "mps2.sqlite", SyntheticRun(
        variant="1x", gpu_count=1, profile_name="1x_rtx4080", mps=True, seed=1))]))
    assert not any("GPU sharing" in n for n in same.notes)
    from engine.record.exporters import export

    with Recording.open(shared) as rec:
        report = Path(export(rec, "md", tmp_path)).read_text()
    assert "MPS: the model instances share each GPU (synthetic)" in report
    with Recording.open(make_recording(tmp_path, "remote.sqlite", SyntheticRun(variant="1x", gpu_count=1))) as rec:
        assert summarize(rec).mps is None
        assert "GPU sharing" not in Path(export(rec, "md", tmp_path / "r")).read_text()


def test_streaming_runs_are_not_compared_with_unary_ones(tmp_path: Path) -> None:
    unary = make_recording(tmp_path, "grpc.sqlite", SyntheticRun(variant="1x", gpu_count=1, transport="grpc"))
    stream = make_recording(tmp_path, "stream.sqlite", SyntheticRun(variant="1x", gpu_count=1, transport="grpc_stream"))
    other = make_recording(tmp_path, "sse.sqlite", SyntheticRun(variant="1x", gpu_count=1, transport="generate_stream"))
    with pytest.raises(UserError) as caught:
        compare(_open([unary, stream]))
    assert str(caught.value) == ("compare: streaming runs (grpc_stream) and unary runs (grpc) measure different "
                                 "things: compare each kind apart")
    assert len(compare(_open([stream, other])).runs) == 2  # two streaming runs compare


def test_cost_by_gpus_on_cpu_runs_is_refused_in_one_line(tmp_path: Path) -> None:
    from engine.errors import UserError
    from tests.engine.record.synthetic_recordings import SyntheticRun, make_recording

    cpu = SyntheticRun(variant="cpu", gpu_count=0, probe=False, levels=[1, 4], profile_name="local")
    paths = [make_recording(tmp_path, name, cpu) for name in ("a.sqlite", "b.sqlite")]
    with pytest.raises(UserError, match=r"^--cost 2=0.6: prices a box by its GPUs, and these runs ran on the CPU"):
        compare(_open(paths), {2: 0.6})
    assert compare(_open(paths)).runs  # without --cost they compare


def test_the_cli_refuses_streaming_beside_unary_in_one_line_with_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    unary = make_recording(tmp_path, "grpc.sqlite", SyntheticRun(variant="1x", gpu_count=1, transport="grpc"))
    stream = make_recording(tmp_path, "stream.sqlite", SyntheticRun(variant="1x", gpu_count=1, transport="grpc_stream"))
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "compare", str(unary), str(stream)], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[3])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "streaming runs (grpc_stream) and unary runs (grpc) measure different things" in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def _compare_cli(*paths: Path) -> str:
    """`compare` as the command line runs it, in this process (it starts nothing: tests/cli_runner.py;
    tests/reliability/test_doctored_recordings.py runs it through the real entry point)."""
    from tests.cli_runner import run_cli_inproc

    proc = run_cli_inproc("compare", *map(str, paths))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_the_cli_labels_runs_of_one_server_by_their_transport_then_their_start_time(tmp_path: Path) -> None:
    run = SyntheticRun(variant="1x", gpu_count=1, profile_name="1x_rtx4080", levels=[1, 4, 8], probe=False)
    http = make_recording(tmp_path, "http.sqlite", run)
    grpc = make_recording(tmp_path, "grpc.sqlite", replace(run, transport="grpc"))
    text = _compare_cli(http, grpc)
    title = text.splitlines()[0]
    assert title == "gpuscale-tui comparison: 1x RTX 4080 (1x_rtx4080) grpc vs 1x RTX 4080 (1x_rtx4080) http"
    assert "#1" not in text and "#2" not in text
    # the same transport: the start time (UTC, t0 is 15:30:00) tells them apart
    later = make_recording(tmp_path, "later.sqlite", replace(run, transport="grpc", t0=run.t0 + 3725))
    title = _compare_cli(http, grpc, later).splitlines()[0]
    assert title == ("gpuscale-tui comparison: 1x RTX 4080 (1x_rtx4080) grpc 15:30:00 vs "
                     "1x RTX 4080 (1x_rtx4080) grpc 16:32:05 vs 1x RTX 4080 (1x_rtx4080) http")
    # nothing to tell them apart by: numbered, as before
    same = make_recording(tmp_path, "same.sqlite", run)
    title = _compare_cli(http, same).splitlines()[0]
    assert title == "gpuscale-tui comparison: 1x RTX 4080 (1x_rtx4080) #1 vs 1x RTX 4080 (1x_rtx4080) #2"
