"""`study --serve` (the LLM serving study) on this CPU box with the real llama-server on the tiny
model: tp1, tp2 and 1*2 (two replicas, the load spread over them), each started from the
template, recorded as a study (one index, replayed); a server that does not start and a replica
killed mid-run each leave "not decided ... failed" and exit 1. Levels c=1,2, short windows; what
these tests wait for is a condition (a server's answer, a log line), never a time. The replicas'
cache figures are read from both servers' /metrics."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from engine.record.reader import Recording
from engine.study.figures import study_figures
from engine.study.index import read_index
from engine.study.pareto import pareto_points

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = Path(__file__).with_name("serve_wrapper.py")
QUICK = ["load.max_trials=1", "load.contended_percent=100", "load.window_ms=300", "load.warmup_s=0.3",
         "load.max_windows=4", "load.stability_percent=1000", "load.concurrency=1,2", "load.output_tokens=12",
         "load.input_tokens=6"]
# The failure tests' levels only have to run: two windows of 10 answers or more (a busy box
# stretches a window, never thins it), not three of 50. The first test keeps QUICK's: its check of
# the replicas' /metrics against the answers is off by the time a late read at a level's edge
# misses, and at 2 windows of 20 a loaded box (3 workers, load 5-9) once read 0.58 of the answers.
SHORT = ("--set", "load.min_window_requests=10", "--set", "load.stable_windows=2")
NO_TEXTUAL = "import sys; sys.modules['textual'] = None; from tui.cli import main; sys.exit(main(sys.argv[1:]))"


def _server_words(binary: str, gguf: Path) -> str:
    # on a CPU box {tp} is llama-server's threads; two slots so that c=2 is served at once; --metrics:
    # each server's /metrics, the cache figures read from every replica; --poll 0: its threads sleep
    # between ops rather than spin (at tp2 on this shared box the spinning was 12.8 CPU-s a run
    # against tp1's 2.4)
    return (f"{shlex.quote(binary)} -m {shlex.quote(str(gguf))} --host 127.0.0.1 --port {{port}} -t {{tp}} "
            "-tb {tp} --poll 0 --parallel 2 --ctx-size 4096 --metrics")


def _study(out: Path, serve: str, variants: str, *extra: str) -> subprocess.CompletedProcess[str]:
    sets = [x for kv in QUICK for x in ("--set", kv)]
    return subprocess.run(
        [sys.executable, "-c", NO_TEXTUAL, "study", "--record", "-o", str(out), "--serve", serve, "--variants", variants,
         "--cost", "1=0.5", "--cost", "2=1", "--slo", "ttft_p99=5s,e2e_p99=10s", "--search-steps", "0", *sets, *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def llama_binary() -> str:
    from tests.openai_server.llama_server import BUILD_HINT, find_llama_server

    binary = find_llama_server()
    if binary is None:
        pytest.skip(f"no llama-server binary: {BUILD_HINT}")
    return binary


@pytest.mark.server
@pytest.mark.slow
def test_serving_study_tp1_tp2_replicas_answers_and_replays(llama_binary, tiny_gguf, tmp_path):
    done = _study(tmp_path, _server_words(llama_binary, tiny_gguf), "tp1,tp2,1*2")
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    (index_path,) = tmp_path.glob("*.study.json")
    index = read_index(index_path)
    assert [r.variant for r in index.runs] == ["tp1", "tp2", "1*2"]
    assert all(r.status == "ok" and r.recording for r in index.runs)
    assert "{port}" in index.serve and "no GPUs on this box" in index.runs[0].how
    logs = sorted(p.name for p in tmp_path.glob("*_serve_logs/*.log"))
    assert logs == ["1_2_server1.log", "1_2_server2.log", "tp1_server1.log", "tp2_server1.log"]
    f = study_figures(index_path)
    assert {c.variant: c.units for c in f.configs} == {"tp1": 1, "tp2": 2, "1*2": 2}
    for c in f.configs:
        assert c.streaming and c.tokens_peak and c.cost_mtok_peak  # $ per million output tokens, from usage
    replicas = next(c for c in f.configs if c.variant == "1*2")
    assert replicas.cost_per_hour == 1.0  # two one-GPU boxes at $0.5/hr
    (scale,) = f.scale
    assert scale.variant == "1*2" and "2 boxes of tp1" in scale.answer.line and "1 box of tp2" in scale.answer.line
    assert scale.answer.choice is not None or "no answer" in scale.answer.line
    # the replicas' levels carry each endpoint's share: the load was spread over both servers
    best = replicas.findings.levels[-1].result
    assert len(best.endpoints) == 2 and all(e.requests > 0 for e in best.endpoints)
    # the cache figures are both replicas': their prompt tokens over the level are about those the
    # level's answers carried (the first server alone: about half, at most 0.625 of them read
    # 25 % long), give or take the edges' readings, which a loaded box may take up to a quarter of
    # the level late and still use (sane_values.read_at_edge): 0.77 at load average 7 on 2 cores
    cache, stream = best.cache, best.stream
    assert stream is not None and stream.input_tokens_per_request is not None
    if cache is None:  # a busy box read the counters too late to stand for the windows' edges: said so
        with Recording.open(index_path.parent / index.runs[2].recording) as rec:
            warnings = rec.summary().warnings
        assert any("cache counters came too late" in w and f"level {best.level:g}:" in w for w in warnings), warnings
    else:
        assert cache.server == "llama.cpp" and cache.prompt_tokens is not None
        carried = stream.input_tokens_per_request * best.requests
        assert 0.65 * carried <= cache.prompt_tokens <= 1.25 * carried, (cache, carried)
    assert "answer:" in done.stdout and "per million" in done.stdout
    (html,) = tmp_path.glob("study_*.html")  # the study report, with its Pareto chart where a level has a point
    text = html.read_text()
    if any(pareto_points(c) for c in f.configs):
        assert "Tokens/s per user vs $ per million output tokens" in text
    else:  # a busy box read every level's chunks together: no per-user rate, and the report says so
        assert "No Pareto chart (tokens/s per user against $/Mtok)" in text
    replay = subprocess.run([sys.executable, "-c", NO_TEXTUAL, "replay", "--headless", str(index_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert replay.returncode == 0, replay.stderr[-2000:]
    assert scale.answer.line in replay.stdout


@pytest.mark.server
@pytest.mark.slow
def test_a_server_that_does_not_start_decides_nothing(llama_binary, tiny_gguf, tmp_path):
    serve = f"{shlex.quote(sys.executable)} {shlex.quote(str(WRAPPER))} --tp {{tp}} --fail-tp 2 -- " + \
        _server_words(llama_binary, tiny_gguf)
    done = _study(tmp_path, serve, "tp1,tp2", *SHORT, "--set", "load.concurrency=1")  # tp1's one level is enough
    assert done.returncode == 1, (done.stdout[-3000:], done.stderr[-3000:])
    assert ("Not decided: tp2 failed (tp2 server exited with code 3 before it was ready: serve_wrapper: refusing "
            "tp=2") in done.stdout  # its log's last line
    assert "answer: not decided: tp2 failed" in done.stdout
    assert done.stderr.strip().endswith("_serve_logs/tp2_server1.log)")  # the log, named
    index = read_index(next(tmp_path.glob("*.study.json")))
    assert [(r.variant, r.status, r.recording is None) for r in index.runs] == [("tp1", "ok", False),
                                                                               ("tp2", "failed", True)]


@pytest.mark.server
@pytest.mark.slow
def test_a_replica_killed_mid_run_decides_nothing(llama_binary, tiny_gguf, tmp_path):
    serve = (f"{shlex.quote(sys.executable)} {shlex.quote(str(WRAPPER))} --tp {{tp}} "
             f"--die-once {shlex.quote(str(tmp_path / 'died'))} -- " + _server_words(llama_binary, tiny_gguf))
    # the replicas alone: the first of the two to take the flag dies at its 5th request
    done = _study(tmp_path / "rec", serve, "1*2", *SHORT)
    assert done.returncode == 1, (done.stdout[-3000:], done.stderr[-3000:])
    assert "answer: not decided: 1*2 failed" in done.stdout
    assert "Not decided: 1*2 failed (1*2 server " in done.stdout and "serve_wrapper: replica killed mid-run" in done.stdout
    (index_path,) = (tmp_path / "rec").glob("*.study.json")
    (run,) = read_index(index_path).runs
    assert run.status == "failed" and run.exit_code == 1 and "serve_logs" in (run.error or "")
    if run.recording:  # the config's own recording says failed and why, not "interrupted"
        with Recording.open(index_path.parent / run.recording) as rec:
            summary = rec.summary()
        assert summary.status == "failed" and "replica killed mid-run" in (summary.error or "")


def test_a_serve_template_without_port_is_one_line_exit_2(tmp_path):
    done = subprocess.run([sys.executable, "-c", NO_TEXTUAL, "study", "--record", "-o", str(tmp_path), "--serve",
                           "vllm serve m --tensor-parallel-size {tp}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gpuscale-tui: error: --serve: the command must name {port} (each server gets its own port)"]
    assert not list(tmp_path.iterdir())  # nothing started, nothing written
