"""Sequence models (Triton's sequence batcher) against the real embedded Triton serving
`accumulator` (a running sum per sequence, its state checked by the model on every step),
`accumulator_idle` (the same with a 1 µs idle timeout, served alone) and `accumulator_oldest` (the oldest
strategy): perf_analyzer's streams file with every step's output checked, first-step and
later-step latency, the wait for a slot, a dropped sequence failing its level, and bad input
refused in one line before any load."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from engine.errors import UserError
from engine.events import InputDataUsed
from engine.record.exporters import export
from engine.record.reader import Recording
from engine.triton.sequences import batcher_line, sequence_config
from engine.triton.target import Target, describe_target
from tests.cli_runner import run_cli
from tests.engine.load.conftest import kill_tritonserver, quick_load, sweep
from tests.reliability.test_bad_input import assert_one_line_exit_2

pytestmark = [pytest.mark.server, pytest.mark.slow]
STREAMS = Path(__file__).resolve().parents[2] / "data" / "accumulator_streams.json"
DOC_STREAMS = STREAMS.with_name("perf_analyzer_streams.json")


@pytest.fixture(scope="module")
def accumulator(tmp_path_factory):
    from engine.server.embedded import EmbeddedServer

    with EmbeddedServer(model="accumulator", variant="cpu", extra_models=("accumulator_oldest",),
                        log_dir=tmp_path_factory.mktemp("triton-accumulator")) as srv:
        yield srv
        # the sweeps leave sequences open (a level's end does not end them): a graceful stop would
        # wait for Triton's idle timeout (5 s) to free them, and nothing here is about the stop
        kill_tritonserver(srv)


@pytest.fixture(scope="class")
def dropping(tmp_path_factory):
    """`accumulator_idle` alone, for the class of dropped sequences only: with a 1 µs idle timeout
    Triton's sequence reaper wakes without pause (a quarter of a core, idle, while it is loaded)."""
    from engine.server.embedded import EmbeddedServer

    with EmbeddedServer(model="accumulator_idle", variant="cpu",
                        log_dir=tmp_path_factory.mktemp("triton-accumulator-idle")) as srv:
        yield srv
        kill_tritonserver(srv)


def _target(server, model: str = "accumulator"):
    target = Target(server.http_url, model)
    return target, asyncio.run(describe_target(target))


def _queue_stats(server, model: str = "accumulator") -> tuple[int, int]:
    """Triton's own queue time (ns) and successful requests for ``model`` so far."""
    import urllib.request

    with urllib.request.urlopen(f"{server.http_url}/v2/models/{model}/stats", timeout=30) as r:
        stats = json.load(r)["model_stats"][0]["inference_stats"]
    return int(stats["queue"]["ns"]), int(stats["success"]["count"])


def _run(server, model: str = "accumulator", **load):
    target, info = _target(server, model)
    results, _events = asyncio.run(sweep(target, info, quick_load(**load)))
    return results


@pytest.mark.parametrize("transport", ["http", "grpc", "system_shm"])
def test_the_streams_file_runs_with_every_steps_output_checked(accumulator, transport) -> None:
    """Each transport sets the sequence's id and flags its own way; one level of 3 streams shows
    every step answered and checked (a second level, which restarts the streams the first left
    unfinished, runs below on http: the restart is the workers' and writes the same slots)."""
    for result in _run(accumulator, input_data=str(STREAMS), concurrency=[3], transport=transport):
        assert result.status in ("stable", "unstable", "contended"), result.error_messages
        assert result.errors == 0 and result.requests > 0
        seq = result.sequence
        assert seq is not None
        assert seq.first_step.count > 0 and seq.later_steps.count > 0 and seq.sequences > 0
        # the file's streams have 4, 3 and 2 steps: a first step for every 2 to 4 answers, give or
        # take the sequences the windows' edges cut (at most one per connection at each edge)
        edges = 2 * result.level * result.merged_windows
        assert seq.first_step.count + seq.later_steps.count == result.requests
        assert 2 * seq.first_step.count - edges <= result.requests <= 4 * seq.first_step.count + 4 * edges


def test_perf_analyzers_documented_streams_run_with_their_outputs_checked(accumulator) -> None:
    """The streams example of perf_analyzer's docs/input_data.md (three streams of 4, 3 and 2
    steps: 1 2 3 4, 1 1 1, 1 1), its values INT32 as the accumulator takes them (the example's
    model takes strings), and validation_data of the running sums; a wrong sum would fail the level.
    The file is read alike for every transport (each one's steps: the test above); two levels, the
    second restarting under START the sequences the first left unfinished, every sum still checked."""
    target, info = _target(accumulator)
    results, events = asyncio.run(sweep(target, info, quick_load(input_data=str(DOC_STREAMS), concurrency=[1, 3],
                                                                 transport="http")))
    (used,) = [e for e in events if isinstance(e, InputDataUsed)]
    assert used.validated and used.requests == 9  # nine steps, every answer compared with its sum
    for result in results:
        assert result.errors == 0 and result.requests > 0, result.error_messages
        assert result.status in ("stable", "unstable", "contended")
        assert result.sequence is not None and result.sequence.sequences > 0
        assert result.sequence.first_step.count and result.sequence.later_steps.count


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_a_wrong_expected_step_fails_the_level_naming_the_entry_and_step(accumulator, tmp_path, transport) -> None:
    doc = json.loads(STREAMS.read_text())
    doc["validation_data"][2][1]["OUTPUT"] = [4]  # the model answers 5 + (-2) = 3
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(doc))
    (result,) = _run(accumulator, input_data=str(path), concurrency=[1], transport=transport)
    assert result.status == "failed"
    assert result.errors_by_kind.get("wrong_answer", 0) > 0
    assert any("entry 2, step 1" in m for m in result.error_messages), result.error_messages


def test_a_sweep_of_sequence_lengths_records_first_and_later_steps(accumulator) -> None:
    (one,) = _run(accumulator, sequence_length=1, sequence_length_variation=0, concurrency=[2])
    assert one.errors == 0 and one.sequence is not None
    # every step is its sequence's first and last: no later step, so none is measured
    assert one.sequence.first_step.count == one.requests == one.sequence.sequences
    assert one.sequence.later_steps.count == 0 and one.sequence.later_steps.p99 is None
    (eight,) = _run(accumulator, sequence_length=8, sequence_length_variation=0, concurrency=[2])
    assert eight.errors == 0 and eight.sequence is not None
    first, later = eight.sequence.first_step.count, eight.sequence.later_steps.count
    edges = 8 * 2 * eight.merged_windows  # steps of sequences cut by the windows' edges
    assert abs(later - 7 * first) <= edges, (first, later)
    assert eight.sequence.first_step.p99 is not None and eight.sequence.later_steps.p99 is not None


def test_more_sequences_than_slots_wait_in_triton_queue_and_on_their_first_step(accumulator) -> None:
    """accumulator holds 16 sequences (max_batch_size 16, one instance): at 24 in flight a new
    sequence waits for one to end, in Triton's queue time, and its first step's latency holds it."""
    before = _queue_stats(accumulator)
    (full,) = _run(accumulator, sequence_length=20, sequence_length_variation=0, concurrency=[24])
    after = _queue_stats(accumulator)
    assert full.errors == 0 and full.sequence is not None, full.error_messages
    first, later = full.sequence.first_step, full.sequence.later_steps
    assert first.p50 is not None and later.p50 is not None and first.p50 > 2 * later.p50, (first, later)
    # the wait is in the queue time Triton reports: one step in 20 is a first, waiting about first.p50
    # (idle here it reads 1.6x that). Over the level's own windows, the span first.p50 is from, where
    # its server breakdown came; else from Triton's counters over the whole run (a busy box can
    # leave a window's late statistics out of the level, never out of these), which also hold the
    # warm-up (a CI clone, 20 first steps measured, read 0.3x there)
    queue_s = (full.server.queue if full.server is not None and full.server.queue is not None
               else (after[0] - before[0]) / 1e9 / max(1, after[1] - before[1]))
    assert queue_s > 0.5 * first.p50 / 20, (queue_s, first.p50, full.server)


def test_the_oldest_strategy_runs_the_streams_checked_past_its_candidates(accumulator) -> None:
    """accumulator_oldest: 4 candidate sequences batched together, the rest in Triton's backlog;
    at 6 in flight (past the candidates) every step's sum is still checked, and the batcher line
    names the strategy."""
    target, info = _target(accumulator, "accumulator_oldest")
    config = sequence_config(info.model_config)
    assert config is not None and config.strategy == "oldest" and config.max_candidates == 4
    assert "oldest strategy): max_sequence_idle_microseconds 5000000 µs, max_candidate_sequences 4;" in \
        batcher_line(config)
    for result in _run(accumulator, "accumulator_oldest", input_data=str(STREAMS), concurrency=[6]):
        assert result.errors == 0 and result.requests > 0, result.error_messages
        assert result.sequence is not None and result.sequence.sequences > 0


def test_drawn_lengths_vary_within_the_variation(accumulator) -> None:
    (result,) = _run(accumulator, sequence_length=10, sequence_length_variation=50, concurrency=[2])
    assert result.errors == 0 and result.sequence is not None
    steps_per_first = result.requests / result.sequence.first_step.count
    assert 5 - 1 <= steps_per_first <= 15 + 1  # lengths drawn in 5..15


def test_a_control_input_in_the_data_is_refused_naming_the_entry_and_step(accumulator, tmp_path) -> None:
    path = tmp_path / "control.json"
    path.write_text(json.dumps({"data": [[{"INPUT": [1]}], [{"INPUT": [1]}, {"INPUT": [2], "START": [1]}]]}))
    target, info = _target(accumulator)
    with pytest.raises(UserError) as caught:
        asyncio.run(sweep(target, info, quick_load(input_data=str(path))))
    line = str(caught.value)
    assert "entry 1, step 1 gives 'START'" in line and "CONTROL_SEQUENCE_START" in line and "\n" not in line


@pytest.mark.parametrize("transport", ["grpc_stream"])
def test_a_transport_that_cannot_set_sequence_ids_is_refused_before_any_load(accumulator, transport) -> None:
    target, info = _target(accumulator)
    with pytest.raises(UserError) as caught:
        asyncio.run(sweep(target, info, quick_load(transport=transport)))
    assert "sequence model" in str(caught.value) and "http" in str(caught.value)


def test_a_batch_size_above_one_is_refused(accumulator) -> None:
    target, info = _target(accumulator)
    with pytest.raises(UserError, match="load.batch_size must be 1"):
        asyncio.run(sweep(target, info, quick_load(batch_size=2)))


QUICK = ["--set", "load.window_ms=400", "--set", "load.warmup_s=0.3", "--set", "load.max_windows=4",
         "--set", "load.workers=1", "--set", "load.max_trials=1", "--set", "load.contended_percent=100"]


def test_a_malformed_streams_file_is_one_line_and_exit_2(accumulator, tmp_path) -> None:
    """A string where the model takes INT32: the model's metadata says so, read from the server."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"data": [[{"INPUT": [1]}, {"INPUT": [2]}], [{"INPUT": [1]}, {"INPUT": ["x"]}]]}))
    proc = run_cli("run", "--record", "--no-check", "--output", str(tmp_path / "rec"), "--url", accumulator.http_url,
                   "--input-data", str(path), "--set", "model.name=accumulator", *QUICK)
    assert_one_line_exit_2(proc, f"input data {path}: data entry 1, step 1, input 'INPUT'")
    assert "level 1/" not in proc.stdout  # no level started


def test_a_control_input_in_the_data_is_one_line_and_exit_2(accumulator, tmp_path) -> None:
    path = tmp_path / "control.json"
    path.write_text(json.dumps({"data": [[{"INPUT": [1], "END": [0]}, {"INPUT": [2]}]]}))
    proc = run_cli("run", "--record", "--no-check", "--output", str(tmp_path / "rec"), "--url", accumulator.http_url,
                   "--input-data", str(path), "--set", "model.name=accumulator", *QUICK)
    assert_one_line_exit_2(proc, "entry 0, step 0 gives 'END'")
    assert "CONTROL_SEQUENCE_END" in proc.stderr and "level 1/" not in proc.stdout  # refused before any load


def test_rate_mode_walks_sequences_too(accumulator) -> None:
    (result,) = _run(accumulator, mode="rate", rates=[150.0], sequence_length=5, sequence_length_variation=0,
                     input_data=str(STREAMS))
    assert result.errors == 0 and result.requests > 0, result.error_messages
    assert result.sequence is not None and result.sequence.sequences > 0


def test_two_load_hosts_drive_checked_sequences_and_the_head_merges_their_steps(accumulator, tmp_path) -> None:
    """Two load hosts on loopback, every step's output checked, and the head's level holding both
    hosts' step figures. (Ids that two hosts shared would mix sums in the model, but only where
    both used an id at once: rare, so this run cannot show the rank's part in the ids;
    tests/engine/triton/test_sequences.py holds it.)"""
    import os
    import socket
    import subprocess
    import sys

    from tests.engine.load.test_sequence_models import QUICK as quick

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    root = Path(__file__).resolve().parents[3]

    def host(rank: int, out: Path) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "tui.cli", "run", "--record", "--no-check", *quick, "-o", str(out),
             "--url", accumulator.http_url, "--set", "model.name=accumulator", "--set", "load.concurrency=4",
             "--input-data", str(STREAMS), "--hosts", "2", "--rank", str(rank), "--rendezvous", f"127.0.0.1:{port}",
             "--rendezvous-timeout", "60"],
            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
            env={**os.environ, "GPUSCALE_RENDEZVOUS_TOKEN": "the-hosts-token"})

    member = host(1, tmp_path / "m")
    head = host(0, tmp_path)
    head_out, head_err = head.communicate(timeout=300)
    member_out, member_err = member.communicate(timeout=120)
    assert head.returncode == 0, (head_out[-3000:], head_err)
    assert member.returncode == 0, (member_out[-3000:], member_err)
    (path,) = tmp_path.glob("*.sqlite")
    with Recording.open(path) as rec:
        (level,) = [e for e in rec.events() if e.kind == "level_result"]
    assert level.errors == 0 and [h.rank for h in level.hosts] == [0, 1], level.error_messages
    assert all(h.requests > 0 for h in level.hosts)
    assert level.sequence is not None and level.sequence.sequences > 0  # merged over both hosts
    assert level.sequence.first_step.count + level.sequence.later_steps.count == level.requests


def test_two_hosts_ranks_keep_their_sequence_ids_apart(accumulator) -> None:
    """Two sweeps at once, as two load hosts' (ranks 0 and 1), every step checked. Both at rank 0,
    their workers' ids would meet in the model now and then (wrong answers, dropped steps)."""
    from engine.load.sweep import run_sweep
    from engine.triton.api import TritonApi

    target, info = _target(accumulator)
    load = quick_load(concurrency=[2], input_data=str(STREAMS), workers=1)

    async def both():
        return await asyncio.gather(*(run_sweep(TritonApi(target, info, rank=rank), load, lambda e: None,
                                                asyncio.Event()) for rank in (0, 1)))

    for (result,) in asyncio.run(both()):
        assert result.requests > 0 and result.errors == 0, result.error_messages


class TestDroppedSequences:
    """A sequence Triton dropped between its steps fails its level, in a sweep and in a run."""

    @pytest.mark.parametrize("transport", ["http", "grpc"])
    def test_a_sequence_the_server_dropped_fails_the_level_and_says_so(self, dropping, transport) -> None:
        (result,) = _run(dropping, "accumulator_idle", sequence_length=4, concurrency=[2], transport=transport)
        assert result.status == "failed"
        assert result.sequence is not None and result.sequence.dropped > 0
        assert result.errors_by_kind.get("sequence_dropped") == result.sequence.dropped
        assert any(m.startswith("Triton dropped sequence") and "max_sequence_idle_microseconds = 1 µs" in m
                   for m in result.error_messages), result.error_messages

    def test_a_run_whose_sequences_were_dropped_ends_failed_with_exit_1(self, dropping, tmp_path) -> None:
        proc = run_cli("run", "--record", "--no-check", "--output", str(tmp_path), "--url", dropping.http_url,
                       "--set", "model.name=accumulator_idle", "--set", "load.concurrency=2",
                       "--set", "load.sequence_length=4", *QUICK)
        assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr)
        assert "Traceback" not in proc.stdout + proc.stderr
        (line,) = proc.stderr.splitlines()  # one line, naming the level and what Triton did
        assert line.startswith("gpuscale-tui: failed: 1 of 1 levels failed (level ") and "Triton dropped sequence" in line
        assert "failed: Triton dropped sequences before their end" in proc.stdout
        # the log states the batcher's limits under the table's header, and the count Triton does not give
        assert "max_sequence_idle_microseconds 1 µs; 16 sequence slots (max_batch_size 16 x 1 instance)" in proc.stdout
        assert "Sequences Triton held: not reported by this server" in proc.stdout
        # the report states the batcher's settings beside the step columns and Triton's queue time
        (recording,) = tmp_path.glob("*.sqlite")
        with Recording.open(recording) as rec:
            report = export(rec, "md", tmp_path / "report").read_text()
        assert "1st step p99" in report and "seq/s" in report and "queue ms" in report
        assert "sequence batcher, direct strategy): max_sequence_idle_microseconds 1 µs; 16 sequence slots" in report
        assert "Sequences Triton held: not reported by this server" in report
