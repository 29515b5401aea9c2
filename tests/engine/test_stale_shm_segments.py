"""Segments and Python-backend regions a killed tool left in /dev/shm are removed at the next
server start, and nothing of a live process is: a tool and its guard both SIGKILLed leave 32 MiB a
stub region behind, until /dev/shm is full."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engine.shm_segments import PYTHON_BACKEND_REGION, remove_stale_segments, server_region_prefix


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: its pid names no process (until reused, which keeps the files)
    return proc.pid


def test_a_dead_tools_segments_and_regions_go_a_live_ones_and_others_stay(tmp_path):
    dead, live = _dead_pid(), os.getpid()
    stale = [f"gpuscale-{dead}-input-0", f"{server_region_prefix(dead)}1c0b755c-839a"]
    kept = [f"gpuscale-{live}-input-0", f"{server_region_prefix(live)}fd151cda-b08e",
            f"{PYTHON_BACKEND_REGION}1", "gpuscale-notapid-x", "other_app_region"]
    for name in stale + kept:
        (tmp_path / name).write_bytes(b"x")
    assert sorted(remove_stale_segments(str(tmp_path))) == sorted(stale)
    assert sorted(os.listdir(tmp_path)) == sorted(kept)


def test_two_servers_of_one_tool_get_distinct_python_backend_prefixes():
    a, b = server_region_prefix(), server_region_prefix()
    assert a != b and a.startswith(f"{PYTHON_BACKEND_REGION}gpuscale-{os.getpid()}-") and b.startswith(PYTHON_BACKEND_REGION)
    assert not a.startswith(b) and not b.startswith(a)  # one's removal never takes the other's regions


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm on this system")
def test_in_dev_shm_too():
    path = f"/dev/shm/{server_region_prefix(_dead_pid())}stale"
    with open(path, "wb") as f:
        f.write(b"x")
    try:
        assert os.path.basename(path) in remove_stale_segments()
        assert not os.path.exists(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)


def test_a_missing_folder_is_nothing_to_remove(tmp_path):
    assert remove_stale_segments(str(tmp_path / "absent")) == []
