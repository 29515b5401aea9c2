"""The wire check (run --wire) against the real embedded Triton: the no-compute `wire` model served
beside the model, the sweep's levels sent to it with the model's bytes, transport and batch, one
WireCeiling event recorded, and the report and the headless output carry its table and line.
A remote server without `wire` is one warning line, not a failed run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine import events as ev
from engine.profiles import load_profile
from engine.record.findings import analyze
from engine.record.reader import Recording
from engine.record.summary import summarize
from engine.session import Session, SessionOptions

REPO = Path(__file__).resolve().parents[3]
QUICK = ["load.max_trials=1", "load.contended_percent=100",  # the box-noise rule off (tests/conftest.py)
         "load.window_ms=300", "load.warmup_s=0.2", "load.max_windows=3", "load.min_window_requests=20",
         "load.stability_percent=90", "load.workers=1"]


@pytest.mark.server
def test_wire_check_in_a_real_session_is_recorded_and_reported(tmp_path: Path) -> None:
    sets = ["model.name=identity", "load.concurrency=1,2", "load.transport=system_shm", *QUICK]
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--record", "--no-check", "--wire",
                           "--output", str(tmp_path), *(a for s in sets for a in ("--set", s))],
                          cwd=REPO, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    (path,) = tmp_path.glob("*.sqlite")
    with Recording.open(path) as rec:
        events = list(rec.events())
        found = analyze(summarize(rec)).wire_assessment
    (wire,) = [e for e in events if isinstance(e, ev.WireCeiling)]
    ready = next(e for e in events if isinstance(e, ev.ServerReady))
    (tensor,) = ready.inputs
    item_bytes = 4 * int(tensor["shape"][-1])  # identity: FP32 [-1, 16]
    assert (wire.model, wire.transport, wire.batch_size, wire.approximated) == ("identity", "system_shm", 1, False)
    assert wire.bytes_per_item == item_bytes and wire.input_shape == [item_bytes // 4]
    assert [lv.level for lv in wire.levels] == [1.0, 2.0]
    assert all(lv.status != "failed" and lv.errors == 0 and lv.throughput_ips > 0 for lv in wire.levels)
    # the wire's peak is its sound levels' (a busy box can leave none: then not decided, and why)
    stable = [lv.throughput_ips for lv in wire.levels if lv.status == "stable"]
    if stable:
        assert wire.peak_ips == max(stable) and not wire.not_decided
    else:
        assert wire.peak_ips is None and wire.not_decided.startswith("no sound level: concurrency 1 ")
    # the wire's levels stay out of the model's sweep: two level results, one sweep
    assert sum(isinstance(e, ev.LevelResult) for e in events) == 2
    assert sum(isinstance(e, ev.SweepFinished) for e in events) == 1
    assert "wire check: the system shared-memory path" in proc.stdout and "wire infer/s" in proc.stdout
    # the line printed live is the recording's (one rule): the peak is the sweep's sound one, and
    # its capacity comes from Triton's compute times there, or the line says they are missing
    assert found is not None and f"wire check done: {found.line}\n" in proc.stdout
    peak = next((r for r in events if isinstance(r, ev.LevelResult) and found.model_peak_level == r.level), None)
    if peak is None:
        assert "the model's peak is not decided (no sound level: " in found.line
    elif peak.server is None:
        assert "Triton's compute times at the model's peak (concurrency " in found.line
    else:
        assert "from Triton's compute times" in found.line

    out = subprocess.run([sys.executable, "-m", "tui.cli", "export", "-f", "md", str(path)], cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    report = path.with_suffix(".md").read_text()
    assert "## The wire's ceiling" in report and "inputs by system shared memory" in report
    assert "the system shared-memory path" in report and found.line[1:] in report
    for lv in wire.levels:
        assert f"| {lv.level:g} | {lv.status} |" in report


@pytest.mark.server
def test_a_remote_server_without_the_wire_model_is_one_warning_and_not_ok(identity_server, tmp_path: Path) -> None:
    profile = load_profile("local", ["server.kind=remote", f"server.url={identity_server.http_url}",
                                     "model.name=identity", "load.concurrency=1", "load.wire_check=true", *QUICK])
    session = Session(profile, SessionOptions(record_dir=tmp_path, check=False, gpu_count=0))
    seen: list[ev.Event] = []
    session.bus.subscribe(seen.append)
    session.start()
    assert session.join(120)
    assert session.exit_code == 1 and session.error and session.error.startswith("wire check skipped"), session.error
    skipped = [e for e in seen if isinstance(e, ev.Warning) and e.key == "wire-skipped"]
    assert len(skipped) == 1 and "\n" not in skipped[0].message
    assert skipped[0].message.startswith("wire check skipped: model 'wire' is not available")
    assert not [e for e in seen if isinstance(e, ev.WireCeiling)]
