"""What the README and --help say is what the tool does: exit 1, the box check on a remote
server, `server --variant cpu2`, the server log kept after it stops, one memory unit per line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.check.facts import BoxFacts, ExpectedHardware, GpuFacts, HostFacts
from engine.check.verdicts import judge_profile
from tui.cli import EXIT_CODES, build_parser

REPO = Path(__file__).resolve().parents[3]
README = (REPO / "README.md").read_text()
GIB = 1 << 30


def test_exit_1_reads_the_same_in_the_readme_and_the_help() -> None:
    # the session exits 1 when any level failed (engine/session.py), not only when all did
    assert "every level failed" not in README
    readme = " ".join(README[README.index("Exit codes:"):].split("\n\n")[0].split())
    help_line = " ".join(EXIT_CODES.split("  1 ")[1].split("  2 ")[0].split())
    assert help_line in readme
    assert "a level failed or the sweep ended early" in help_line


def test_the_readme_says_when_the_box_check_is_skipped() -> None:
    text = " ".join(README.split())
    assert "Every session runs it first" not in text
    assert "a sweep against a remote server skips it" in text


def test_server_takes_every_variant_the_repository_has() -> None:
    parser = build_parser()
    assert parser.parse_args(["server", "--variant", "cpu2"]).variant == "cpu2"
    assert parser.parse_args(["server", "--variant", "16x"]).variant == "16x"
    with pytest.raises(SystemExit):
        parser.parse_args(["server", "--variant", "gpu"])


def test_a_check_line_says_one_memory_unit() -> None:
    expected = ExpectedHardware(profile="p", gpu_model="H200", gpu_count=1, vram_gb=141, ram_gb=256)
    host = HostFacts(cpu_cores=16, cpu_cores_online=16, ram_bytes=251 * GIB, disk_free_bytes=100 * GIB,
                     disk_path="recordings")
    facts = BoxFacts(host=host, expected=expected, gpus=[GpuFacts(index=0, uuid="GPU-0", name="NVIDIA H200",
                                                                 mem_total=140 * GIB)])
    for item in judge_profile(expected, facts):
        if item.name in ("vram", "ram"):
            assert "GiB" in item.measured and item.expected.startswith(("141 GiB", "256 GiB")), item


@pytest.mark.server
def test_the_printed_server_log_is_there_after_it_stops(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "server", "--model", "identity", "--variant", "cpu"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)})
    log = None
    try:
        deadline = time.monotonic() + 120
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("log "):
                log = Path(line.split()[1])
            if line.startswith("Ctrl-C stops"):
                break
        assert log is not None, "no log line"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        assert log.is_file() and log.stat().st_size > 0 and log.is_relative_to(tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
