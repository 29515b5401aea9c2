"""`gpuscale-tui check --json` on a box with CPU hogs that are not ours: a host-contention item
that warns, with the hogs among the busiest others it names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.hogs import HOG_NAME, cpu_hogs
from engine.hostinfo import process_cores


@pytest.mark.noise
@pytest.mark.slow
def test_check_names_the_hogs_in_a_host_contention_item(tmp_path: Path) -> None:
    with cpu_hogs(process_cores(), tmp_path) as pids:
        done = subprocess.run([sys.executable, "-m", "tui.cli", "check", "--json", "--quick", "-o", str(tmp_path)],
                              capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (item,) = [i for i in report["items"] if i["name"] == "contention"]
    assert item["status"] in ("warn", "fail") and item["scope"] == "host"
    assert "taken by other processes" in item["measured"] and item["expected"] == "< 10 %"
    named = report["facts"]["host"]["others_top"]
    assert any(f"{HOG_NAME} ({pid})" in line for pid in pids for line in named), named
    assert report["facts"]["host"]["others_cpu"] > 0.1
    assert {i["name"] for i in report["items"]} >= {"load average", "cpu steal"}
