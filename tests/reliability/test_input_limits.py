"""Input data and request shapes that could take the box: special files, a lone surrogate, a
request shape of tens of gigabytes. Each is one line and exit 2 before any load, against a
loopback server (tests/reliability/hostile_server.py), with the memory measured where memory is
the point; and a SIGTERM while the requests are being prepared ends the run, exit 130."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.helpers import run_measured
from tests.reliability.hostile_server import HostileTriton, Reply, remote_profile
from tests.reliability.test_bad_input import assert_one_line_exit_2

ROOT = Path(__file__).resolve().parents[2]
TEXT_MODEL = {"name": "m", "versions": ["1"], "platform": "python",
              "inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [-1, -1]}],
              "outputs": [{"name": "OUT", "datatype": "BYTES", "shape": [-1, -1]}]}
TEXT_CONFIG = {"name": "m", "max_batch_size": 8, "backend": "python",
               "input": [{"name": "TEXT", "data_type": "TYPE_STRING", "dims": [-1]}],
               "output": [{"name": "OUT", "data_type": "TYPE_STRING", "dims": [-1]}]}


def _text_server(extra_fp32: bool = False) -> HostileTriton:
    """A model taking TEXT (BYTES), and with ``extra_fp32`` y2 (FP32), both of any shape."""
    model, config = json.loads(json.dumps(TEXT_MODEL)), json.loads(json.dumps(TEXT_CONFIG))
    if extra_fp32:
        model["inputs"].append({"name": "y2", "datatype": "FP32", "shape": [-1, -1, -1]})
        config["input"].append({"name": "y2", "data_type": "TYPE_FP32", "dims": [-1, -1]})
    return HostileTriton(metadata=Reply(200, model), config=Reply(200, config))


SHAPES = [
    ("{ TEXT = [1], y2 = [30000, 30000] }", "one request's inputs would take 3.35 GiB"),  # was 6.7 GiB, MemoryError
    ("{ TEXT = [100000000000], y2 = [1, 1] }", "one request's inputs would take 1.12e+03 GiB"),  # spun for minutes
]


@pytest.mark.slow
@pytest.mark.parametrize(("shapes", "needle"), SHAPES)
def test_a_huge_request_shape_is_refused_before_it_is_built(tmp_path: Path, shapes: str, needle: str):
    """load.input_shapes of tens of gigabytes: refused from the shape alone. The tool's peak RSS
    (its children's, measured by the kernel) stays that of a tool that allocated nothing."""
    with _text_server(extra_fp32=True) as srv:
        profile = remote_profile(tmp_path / "p.toml", srv.where)
        Path(profile).write_text(Path(profile).read_text().replace("[load]\n", f"[load]\ninput_shapes = {shapes}\n"))
        proc, peak_kib = run_measured(tmp_path, "--record", "--no-check", "--output", str(tmp_path), "--profile", profile)
        assert not [s for s in srv.seen if s.path.endswith("/infer")]
    assert_one_line_exit_2(proc, needle)
    assert peak_kib < 256 << 10, f"peak RSS {peak_kib >> 10} MiB"  # a tool that built nothing (about 60 MiB)


@pytest.mark.real_cli  # the CLI process's memory is read: the real interpreter (tests/cli_zygote.py)
@pytest.mark.slow
def test_sigterm_while_the_requests_are_prepared_ends_the_run(tmp_path: Path):
    """A large data file is being decoded (seconds) when SIGTERM comes: the decode stops within
    a megabyte, no level starts, and the run ends interrupted (exit 130)."""
    data = tmp_path / "data.json"
    with data.open("w") as f:
        f.write('{"data": [')
        row = ",".join(["0.25"] * 1_000_000)
        f.write(",".join(f'{{"INPUT0": {{"content": [{row}], "shape": [250000, 4]}}}}' for _ in range(40)))
        f.write("]}")
    srv = HostileTriton(config=Reply(200, {"name": "m", "max_batch_size": 0, "backend": "python",
                                           "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1, 4]}],
                                           "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1, 4]}]}),
                        metadata=Reply(200, {"name": "m", "versions": ["1"], "platform": "python",
                                             "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]}],
                                             "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 4]}]}))
    with srv:
        proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "--record", "--no-check", "--output", str(tmp_path),
                                 "--input-data", str(data), "--profile", remote_profile(tmp_path / "p.toml", srv.where)],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait_for_the_decode(proc.pid)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)  # the promise: stopped within 30 s
        finally:
            if proc.poll() is None:
                proc.kill()
        assert not [s for s in srv.seen if s.path.endswith("/infer")], out[-2000:]  # no level sent load
    assert proc.returncode == 130, (proc.returncode, out[-2000:], err[-2000:])
    assert "Traceback" not in out + err


def _wait_for_the_decode(pid: int) -> None:
    """Until the tool is reading or decoding the data file: its RSS past 300 MB (a tool at rest
    takes about 100 MB; the file's text is 200 MB)."""
    while True:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            raise AssertionError("the tool ended before its decode began") from None
        rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        if rss > 300_000:  # KiB: the file's 200 MB of text read, or being read: the preparation is under way
            return
        time.sleep(0.05)
