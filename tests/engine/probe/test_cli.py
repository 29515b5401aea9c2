"""`python -m engine.probe`: one-line errors, a local run, and the torchrun (multi-node) path."""

import json
import re
import subprocess
import sys

import pytest

from engine.events import AllReduceResult, ProbeResult, StatSummary, event_from_dict
from engine.probe.cli import main

TINY = ["--batch-sizes", "4", "--steps", "2", "--warmup-steps", "1", "--repeats", "2", "--device", "cpu"]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--precision", "fp8"], "error: command line: probe.precision: expected one of 'fp32', 'bf16', 'fp16'"),
        (["--models", "nope"], "error: unknown model 'nope'"),
        (["--baseline", "x.jsonl"], "error: --baseline is for torchrun runs"),
        (["--dataset-size", "0"], "error: command line: probe.dataset_size: expected a positive integer, found 0"),
        (["--cost-per-hour", "-1"], "error: --cost-per-hour: expected a price in $/hr >= 0, found -1.0"),
    ],
)
@pytest.mark.xdist_group("torch")  # an unknown model name imports torch: tests/conftest.py
def test_bad_input_is_one_line_and_exit_2(argv, fragment, capsys, no_ranks_left):
    assert main(argv + TINY) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1


def test_a_malformed_flag_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--world-sizes", "1,x"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "expected comma-separated integers, found '1,x'" in err and err.count("\n") == 1


def _events(path):
    return [event_from_dict(json.loads(line)) for line in path.read_text().splitlines()]


def _baseline_file(path, mean: float, std: float) -> None:
    """A world-size-1 result as an earlier local run would have written it."""
    single = ProbeResult(
        model="mlp_258k", params=258_432, strategy="single", scaling="weak", world_size=1, per_device_batch=4,
        global_batch=4, device="cpu", backend="gloo", precision="fp32",
        samples_per_s=StatSummary(mean=mean, ci_low=None, ci_high=None, n=2, std=std),
        step_time_s=StatSummary(mean=4 / mean, ci_low=None, ci_high=None, n=2),
    )
    path.write_text(json.dumps(single.to_dict()) + "\n")


@pytest.mark.slow
@pytest.mark.xdist_group("cpu_heavy")  # torch ranks: tests/conftest.py
def test_torchrun_ranks_report_against_a_baseline(tmp_path, no_ranks_left):
    """What docs/probe.md gives for multi-node, here as 2 local ranks: torchrun starts them."""
    ws1, ws2 = tmp_path / "ws1.jsonl", tmp_path / "ws2.jsonl"
    _baseline_file(ws1, mean=1000.0, std=10.0)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "engine.probe", "--models", "mlp_258k", "--allreduce", "--allreduce-max-bytes", "4096",
           "--baseline", str(ws1), "--jsonl", str(ws2), *TINY]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mlp_258k" in done.stdout and "all-reduce, 2 ranks, gloo on cpu" in done.stdout
    events = _events(ws2)
    (multi,) = [e for e in events if isinstance(e, ProbeResult)]
    assert (multi.world_size, multi.strategy, multi.global_batch, multi.params) == (2, "ddp", 8, 258_432)
    assert multi.speedup == pytest.approx(multi.samples_per_s.mean / 1000.0)
    assert multi.p_value is not None
    (sweep,) = [e for e in events if isinstance(e, AllReduceResult)]
    assert [r.size_bytes for r in sweep.rows] == [1024, 2048, 4096]


@pytest.mark.slow
@pytest.mark.xdist_group("cpu_heavy")  # torch ranks: tests/conftest.py
def test_a_local_run_prints_the_training_bill_per_world_size(tmp_path, capsys, no_ranks_left):
    from engine import columns
    from engine.analysis.training_bill import training_bill

    jsonl = tmp_path / "run.jsonl"
    argv = ["--models", "mlp_258k", "--world-sizes", "1,2", "--dataset-size", "50000", "--cost-per-hour", "3",
            "--jsonl", str(jsonl), *TINY]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    results = [e for e in _events(jsonl) if isinstance(e, ProbeResult)]
    assert [r.world_size for r in results] == [1, 2]
    # the bill printed is the one the measured results give: per world size, time and $ per epoch
    bill = training_bill(results, 50_000, 3.0)
    at = out.index("training bill")
    assert out[at + 1] == columns.header_line(columns.BILL)
    for k, row in enumerate(bill.rows):
        assert row.epoch_s is not None and row.cost is not None
        assert row.epoch_s.mean * results[k].samples_per_s.mean == pytest.approx(50_000)
        assert out[at + 2 + k] == columns.fixed_line(columns.BILL, columns.cells(columns.BILL, row))
        assert out[at + 2 + k].split()[4] == str(results[k].world_size)
    assert out[at + 4] == "priced at $3/hr, the whole box at every world size"
    # the stop rule printed is the one the measured results give, with its reason
    assert [out[at + 5]] == [f"{s.label}: {s.stop.reason}" for s in bill.stops]
    # on a busy box tiny runs' repeats may disagree; the rule then names the world size it cannot use
    # and stops on the other ("1x not decided (why); stop at 2 ranks, ..." or "stop at 1 rank: 2x not
    # decided (why)"), or, with neither usable, the whole answer is "not decided: 1x: ...; 2x: ..."
    stop = r"(?:1x not decided \(world size 1: its repeats disagree .+\); )?stop at (?:1 rank|2 ranks)[:,] .+"
    neither = r"not decided: 1x: world size 1: its repeats disagree .+; 2x: world size 2: its repeats disagree .+"
    assert re.fullmatch(rf"mlp_258k ddp weak b4: (?:{stop}|{neither})", out[at + 5])
    # the stop rule rests on world sizes whose repeats agree; on a busy box they may not: then it says so
    assert "samples/s per added rank (mean samples/s)" in out[at + 5] or "its repeats disagree" in out[at + 5]


def test_settings_come_from_the_profile_then_the_flags():
    from engine.probe.cli import build_parser, settings_from_args

    s = settings_from_args(build_parser().parse_args(["--profile", "4x_h200", "--steps", "7", "--scaling", "weak"]))
    assert (s.models, s.world_sizes, s.steps, s.scaling, s.precision) == (
        ["mlp_258k", "mlp_6.9m", "transformer"], [1, 2, 4], 7, ["weak"], "bf16")
    plain = settings_from_args(build_parser().parse_args([]))
    assert plain.allreduce is False  # without a profile the sweep is opt-in
    assert settings_from_args(build_parser().parse_args(["--allreduce"])).allreduce is True


def test_output_writes_every_event_and_prints_the_tables(tmp_path):
    from engine.events import AllReduceRow, PhaseChanged
    from engine.probe.cli import Output

    out_path = tmp_path / "ws1.jsonl"
    _baseline_file(out_path, mean=1000.0, std=10.0)
    (result,) = _events(out_path)
    result.speedup, result.efficiency = 1.0, 1.0
    sweep = AllReduceResult(world_size=2, backend="nccl", device="cuda", link="NVLink4 x18", link_limit_gbps=450.0,
                            rows=[AllReduceRow(size_bytes=1 << 30, time_s=0.005, algbw_gbps=214.7, busbw_gbps=214.7)])
    out = Output(tmp_path / "all.jsonl", stream=open(tmp_path / "progress.txt", "w"))
    for event in (PhaseChanged(phase="probe", detail="x"), result, sweep):
        out(event)
    out.close()
    assert [type(e) for e in _events(tmp_path / "all.jsonl")] == [PhaseChanged, ProbeResult, AllReduceResult]
    text = out.tables()
    assert "1,000" in text and "1.00x" in text and "100%" in text
    assert "1 GiB" in text and "5,000.0" in text and "48%" in text  # 214.7 / 450 busbw of the link


@pytest.mark.slow
@pytest.mark.xdist_group("cpu_heavy")  # torch ranks: tests/conftest.py
def test_a_torchrun_rank_skips_interpreter_teardown(tmp_path, no_ranks_left):
    """A rank that exits normally runs torch's static destructors with C++ threads
    still joinable and sometimes aborts after its tables ("terminate called without an active
    exception"). Like the local worker, a rank must leave with os._exit once flushed: an atexit
    hook (run by a normal exit only) shows which way it left. One rank, so no timing involved."""
    import os
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = ("import atexit, sys; atexit.register(lambda: print('TEARDOWN RAN', flush=True)); "
            "from engine.probe.cli import main; sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "TORCHELASTIC_RUN_ID": "t", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
           "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    done = subprocess.run([sys.executable, "-c", code, "--models", "mlp_258k", "--jsonl", str(tmp_path / "r.jsonl"),
                           *TINY], capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mlp_258k" in done.stdout  # the tables were printed (and flushed) before leaving
    assert "TEARDOWN RAN" not in done.stdout
