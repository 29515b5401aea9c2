"""The study against the real embedded Triton (identity model, CPU variants cpu and cpu2): the
headless CLI end to end, the remote model-control path (a server in explicit mode), bad input,
and an interrupted study. Tiny windows (200 ms) and two levels keep each study to seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine import events as ev
from engine.analysis.slo import next_search_level, parse_slo
from engine.profiles import load_profile
from engine.record.reader import Recording
from engine.server.embedded import EmbeddedServer
from engine.study.figures import study_figures
from engine.study.index import read_index, recording_paths
from engine.study.model_control import current_config
from engine.study.study_source import StudySource
from tests.cli_runner import run_cli_inproc
from tests.conftest import SUITE_PACE_MS
from tui.cli import main

ROOT = Path(__file__).resolve().parents[3]
# the box-noise rule off and a wide stability band: these test the study's mechanics, and on this
# shared box 200 ms windows disagree by more than 10 % (an unstable level decides nothing)
QUICK = ["load.max_trials=1", "load.contended_percent=100", "load.stability_percent=100",
         "model.name=identity", "load.window_ms=200", "load.warmup_s=0.2", "load.min_window_requests=20",
         "load.max_windows=4", "load.request_timeout_s=5"]
# the CLI as a person runs it, with textual made unimportable: headless must not need it
NO_TEXTUAL = "import sys; sys.modules['textual'] = None; from tui.cli import main; sys.exit(main(sys.argv[1:]))"


def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", NO_TEXTUAL, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _instances(recording: Recording) -> int:
    config = recording.summary().model_config
    return sum(int(g.get("count", 1)) for g in config.get("instance_group", []))


def _check_search(recording: Recording, slo: str, max_steps: int) -> None:
    """Whatever the latencies were, the extra levels are exactly the bisection of the ones before,
    over the levels that decide (the sound ones and the failed ones: engine/analysis/answer.py)."""
    from engine.analysis.answer import slo_measured

    s = parse_slo(slo)
    results = sorted((lv.result for lv in recording.summary().levels), key=lambda r: r.index)
    for k, result in enumerate(results):
        if result.slo_search:
            done = results[:k]
            assert next_search_level(slo_measured(done, s), s.target_s, steps_done=sum(r.slo_search for r in done),
                                     max_steps=max_steps) == result.level
    assert next_search_level(slo_measured(results, s), s.target_s, steps_done=sum(r.slo_search for r in results),
                             max_steps=max_steps) is None


@pytest.mark.server
@pytest.mark.xdist_group("cpu_study")  # a CPU study: tests/conftest.py
def test_cpu_study_headless_end_to_end(tmp_path, monkeypatch):
    out = tmp_path / "rec"
    sets = [x for kv in [*QUICK, "load.concurrency=1,32", "hardware.cost_per_hour=1.5"] for x in ("--set", kv)]
    # the suite's model pace plus 4 ms: c=1 (one execute at the pace, and the request path) meets it
    # also on a loaded box (next to 8 gloo ranks a p99 target made the first config's result "no
    # usable result"), while c=32 (32 executes in turn, each at the pace) misses it: the search runs
    slo = f"p50={SUITE_PACE_MS + 4:g}ms"
    done = _cli("study", "--record", *sets, "--slo", slo, "--search-steps", "2", "-o", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert "left for the whole study" in done.stdout and "study ok: finished cpu, cpu2" in done.stdout
    assert "on an embedded server" in done.stdout and "1 level done" in done.stdout
    (index_path,) = out.glob("*.study.json")
    index = read_index(index_path)
    assert index.finished == ["cpu", "cpu2"] and index.missing == [] and index.status == "ok"
    recordings = dict(recording_paths(index, index_path))
    for variant, instances in (("cpu", 1), ("cpu2", 2)):
        with Recording.open(recordings[variant]) as rec:
            assert rec.summary().config_variant == variant and _instances(rec) == instances
            _check_search(rec, slo, 2)
    _check_taken_once(index, index_path, done.stdout)
    figures = study_figures(index_path)
    assert [c.variant for c in figures.configs] == ["cpu", "cpu2"] and figures.unit == "CPU instance"
    decided = [c for c in figures.configs if c.peak_throughput]  # a config of unstable levels decides nothing
    assert all(c.cost_peak for c in decided) and all(c.not_decided for c in figures.configs if c not in decided)
    if figures.request_cap is not None:  # the request path held both configs on this box: no size to stop at
        assert figures.stop.variant is None and figures.stop.reason.startswith("not a CPU instance question here: ")
    elif decided:
        assert figures.stop.variant in ("cpu", "cpu2") and "CPU instance" in figures.stop.reason
    else:
        assert figures.stop.variant is None and figures.stop.reason.startswith("not decided: ")
    assert {p.suffix for p in out.glob("study_*")} == {".json", ".md", ".html"}
    assert "Throughput vs concurrency" in next(out.glob("study_*.html")).read_text()

    # the index stands for the whole study in compare, export and replay; compare and export
    # start no thread or process: in this process (tests/cli_runner.py), textual unimportable
    monkeypatch.setitem(sys.modules, "textual", None)
    compared = run_cli_inproc("compare", str(index_path))
    assert compared.returncode == 0 and "cpu (local)" in compared.stdout and "cpu2 (local)" in compared.stdout
    exported = run_cli_inproc("export", str(index_path), "-f", "md", "--out", str(tmp_path / "x"))
    recommendation = figures.stop.reason[0].upper() + figures.stop.reason[1:]  # "Stop at 2 CPU instances..."
    assert exported.returncode == 0
    assert f"## Recommendation\n\n{recommendation}." in Path(exported.stdout.strip()).read_text()
    replayed = _cli("replay", str(index_path), "--headless")
    assert replayed.returncode == 0 and "=== config 2/2: cpu2" in replayed.stdout
    assert "box check (the study's check, taken before config cpu, not repeated)" in replayed.stdout
    cpu2 = dict(recording_paths(index, index_path))["cpu2"]
    one = run_cli_inproc("export", str(cpu2), "-f", "md", "--out", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr
    report = Path(one.stdout.strip()).read_text()
    assert "## Box check" in report and "the study's check, taken before config cpu" in report


def _check_taken_once(index, index_path: Path, stdout: str) -> None:  # noqa: ANN001 - a StudyIndex
    """The box check ran in the first config's session only; every config's recording carries
    that same result, the later ones marked as the study's."""
    checks = {}
    for variant, path in recording_paths(index, index_path):
        with Recording.open(path) as rec:
            events = list(rec.events())
        kinds = [e.kind for e in events]
        assert kinds.count("box_check") == 1 and kinds.index("box_check") < kinds.index("server_ready"), variant
        checks[variant] = next(e for e in events if e.kind == "box_check")
        # the check's own progress lines appear only where it was measured
        progress = [e for e in events if e.kind == "phase" and e.phase == "box check"]
        assert bool(progress) == (variant == "cpu"), (variant, progress)
    measured = [v for v, c in checks.items() if not c.reused]
    assert measured == ["cpu"], checks
    assert checks["cpu2"].reused == "the study's check, taken before config cpu"
    assert (checks["cpu2"].summary, checks["cpu2"].items, checks["cpu2"].facts) == \
        (checks["cpu"].summary, checks["cpu"].items, checks["cpu"].facts)
    assert stdout.count("box check done in") == 1 and stdout.count("box check: reading the host") == 1
    assert "box check (the study's check, taken before config cpu, not repeated)" in stdout


@pytest.mark.server
@pytest.mark.xdist_group("cpu_study")  # a CPU study: tests/conftest.py
def test_remote_model_control_loads_each_variant(tmp_path):
    with EmbeddedServer(model="identity", variant="cpu", model_control="explicit", log_dir=tmp_path / "srv") as srv:
        profile = load_profile("local", [*QUICK, "load.concurrency=2", "server.kind=remote",
                                         f"server.url={srv.http_url}"])
        study = StudySource(profile, ["cpu2", "cpu"], record_dir=tmp_path / "rec")
        events: list[ev.Event] = []
        study.bus.subscribe(events.append)
        study.prepare()
        assert study.server_kind == "remote (model control)"
        study.start()
        assert study.join(180) and study.exit_code == 0, study.error
        started = [e for e in events if isinstance(e, ev.StudyVariantStarted)]
        assert [e.variant for e in started] == ["cpu", "cpu2"]
        assert all("repository API" in e.how for e in started)
        index = read_index(study.index_path)
        assert index.server == "remote (model control)" and index.finished == ["cpu", "cpu2"]
        for variant, path in recording_paths(index, study.index_path):
            with Recording.open(path) as rec:
                assert _instances(rec) == {"cpu": 1, "cpu2": 2}[variant]
        assert current_config(srv.http_url, "identity", {})["instance_group"][0]["count"] == 2


@pytest.mark.slow
def test_remote_without_model_control_and_no_terminal_is_bad_input(identity_server, tmp_path):
    # the session's server (tests/conftest.py) runs without model control
    done = _cli("study", "--set", "model.name=identity", "--set", "server.kind=remote", "--set",
                f"server.url={identity_server.http_url}", "-o", str(tmp_path / "rec"), timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no model control" in done.stderr and "explicit" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("args, needle", [
    (["--variants", "cpu,cpu7"], "has no cpu7 variant (available: cpu, cpu2)"),
    (["--set", "model.name=vit_tiny", "--variants", "cpu,1x"], "variant 1x needs 1 GPU; this machine has 0"),
    (["--variants", "one"], "--variants: unknown variant 'one'"),
    (["--slo", "p99=fast"], "--slo 'p99=fast': expected PERCENTILE=TARGET"),
    (["--slo", "p42=5ms"], "--slo 'p42=5ms'"),
])
def test_bad_study_input_is_one_line_and_exit_2(args, needle, tmp_path, capsys, monkeypatch):
    import engine.server.gpus

    monkeypatch.setattr(engine.server.gpus, "visible_gpu_count", lambda: 0)  # as on this CPU-only machine
    code = main(["study", "--record", "--set", "model.name=identity", "-o", str(tmp_path), *args])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1


@pytest.mark.server
@pytest.mark.xdist_group("cpu_study")  # a CPU study: tests/conftest.py
def test_interrupted_study_keeps_finished_variants_and_names_the_missing(tmp_path):
    profile = load_profile("local", [*QUICK, "load.concurrency=1,2"])
    study = StudySource(profile, None, record_dir=tmp_path, gpu_count=0)
    events: list[ev.Event] = []

    def watch(event: ev.Event) -> None:
        events.append(event)
        if isinstance(event, ev.LevelResult) and any(
                isinstance(e, ev.StudyVariantStarted) and e.variant == "cpu2" for e in events):
            study.stop()  # in the middle of the second config

    study.bus.subscribe(watch)
    study.prepare()
    study.start()
    assert study.join(180)
    assert study.exit_code == 130 and "cpu2" in (study.error or "")
    index = read_index(study.index_path)
    assert index.status == "interrupted" and index.finished == ["cpu"] and index.missing == ["cpu2"]
    assert json.loads(study.index_path.read_text())["missing"] == ["cpu2"]
    finished = [e for e in events if isinstance(e, ev.StudyFinished)]
    assert finished[-1].missing == ["cpu2"] and finished[-1].exit_code == 130
    cpu = dict(recording_paths(index, study.index_path))["cpu"]
    with Recording.open(cpu) as rec:
        assert rec.summary().status == "ok" and len(rec.summary().levels) == 2
    assert [c.variant for c in study_figures(study.index_path).configs] == ["cpu"]
