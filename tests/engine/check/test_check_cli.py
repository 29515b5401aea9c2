"""`gpuscale-tui check` for real on this machine (no GPU, no NVIDIA driver): the host-only path,
its exit codes, its JSON, and that it never needs the TUI stack (GPU boxes have no textual)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.check.host_facts import cgroup_cpu_limit, cgroup_memory_limit, free_disk, usable_cores

REPO = Path(__file__).resolve().parents[3]


def cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", "check", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_no_gpu_checks_the_host_and_exits_0(tmp_path: Path):
    out = cli("--output", str(tmp_path / "rec"))
    assert out.returncode == 0, out.stderr
    assert "no GPU (NVML unavailable" in out.stdout and "host checked only" in out.stdout
    for name in ("cpu cores", "ram", "disk free"):
        assert name in out.stdout
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_json_is_the_box_check_event(tmp_path: Path):
    out = cli("--json", "--output", str(tmp_path))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["kind"] == "box_check" and data["gpus"] == 0 and data["verdict"] in ("go", "warn")
    host = data["facts"]["host"]
    assert host["cpu_cores"] >= 1 and host["ram_bytes"] > 0 and host["disk_free_bytes"] > 0
    assert {i["scope"] for i in data["items"]} == {"host", "profile local"}


@pytest.mark.slow
def test_a_profile_this_box_is_not_exits_3(tmp_path: Path):
    out = cli("--profile", "4x_h200", "--output", str(tmp_path))
    assert out.returncode == 3
    assert "NO-GO" in out.stdout and "gpu count" in out.stdout


@pytest.mark.slow
def test_a_bad_profile_is_one_line_and_exit_2():
    out = cli("--profile", "no_such_profile")
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


@pytest.mark.slow
def test_the_check_path_imports_no_tui_stack(tmp_path: Path):
    code = (
        "import sys\n"
        "from tui.cli import main\n"
        f"rc = main(['check', '--json', '--output', {str(tmp_path)!r}])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'tritonclient', 'torch'))\n"
        "print('BAD', bad, rc, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "BAD [] 0" in out.stderr, out.stderr


@pytest.mark.slow
def test_the_cuda_child_says_why_without_cuda():
    """engine.check.measure for real: torch is here, CUDA is not."""
    out = subprocess.run([sys.executable, "-m", "engine.check.measure"], cwd=REPO, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "error": "torch sees no CUDA device: bandwidth and load not measured"}


def test_cgroup_limits(tmp_path: Path):
    (tmp_path / "cpu.max").write_text("750000 100000\n")
    (tmp_path / "memory.max").write_text(str(8 << 30))
    assert cgroup_cpu_limit(tmp_path) == 7.5 and cgroup_memory_limit(tmp_path) == 8 << 30
    (tmp_path / "cpu.max").write_text("max 100000\n")
    (tmp_path / "memory.max").write_text("max\n")
    assert cgroup_cpu_limit(tmp_path) is None and cgroup_memory_limit(tmp_path) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000")
    assert cgroup_cpu_limit(v1) is None
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("250000")  # a v1 quota: 2.5 CPUs
    assert cgroup_cpu_limit(v1) == 2.5
    assert usable_cores(64, 64, 7.5) == 8 and usable_cores(64, 16, None) == 16 and usable_cores(None, None, None) is None


def test_free_disk_of_a_folder_not_made_yet(tmp_path: Path):
    free, where = free_disk(tmp_path / "not" / "yet")
    assert free is not None and free > 0 and where.endswith("not/yet")
