"""`python -m bench`: the list of stages, each stage's flags, and one clear line for a bad stage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import STAGES

ROOT = Path(__file__).resolve().parents[2]


def bench(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", *argv], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_help_lists_every_stage() -> None:
    done = bench("--help")
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ") and not line.strip().startswith("fits:")]
    assert listed == [s.name for s in STAGES]


@pytest.mark.parametrize("argv", [[s.name] for s in STAGES] + [["model_speed", "all"], ["model_speed", "serve"]],
                         ids=lambda argv: " ".join(argv))
@pytest.mark.slow
def test_each_stage_parses_its_flags(argv: list[str]) -> None:
    done = bench(*argv, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m bench {' '.join(argv)}")
    if len(argv) == 1:  # a stage's own help says which device run it fits in
        assert "Fits:" in done.stdout


def test_an_unknown_stage_is_one_line_and_exit_2() -> None:
    done = bench("no_such_stage")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "python -m bench: no stage 'no_such_stage'; stages: " + ", ".join(s.name for s in STAGES)]


def test_a_bad_level_list_is_one_line_before_anything_starts() -> None:
    done = bench("client_cpu", "--levels", "8,x")
    assert done.returncode == 2
    assert done.stderr.strip() == "client_cpu: --levels / --rates-of-peak: invalid literal for int() with base 10: 'x'"
    assert done.stdout == ""


def test_a_fleet_variant_for_one_servers_start_is_one_line_and_exit_2() -> None:
    done = bench("server_start", "--variant", "1x*2")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "python -m bench server_start: error: --variant 1x*2: a fleet of servers; this stage times one server's start"]


def test_the_estimate_plans_without_a_server() -> None:
    done = bench("fidelity", "--models", "identity", "--levels", "1,8", "--rounds", "2", "--rates-of-peak", "0.5",
                 "--window-ms", "1000", "--max-windows", "4", "--run-overhead-s", "1", "--server-start-s", "5", "--estimate")
    assert done.returncode == 0, done.stderr
    # 2 tools x 2 rounds x (2 levels + 1 rate) = 12 runs; low 12 x (1 + 3 x 1) + 5, high 12 x (1 + 4 x 1) + 5
    assert "plan: 12 tool runs" in done.stdout
    assert "estimate 53-65 s" in done.stdout


@pytest.mark.parametrize(("flags", "line"), [
    (("--server-cpus", "0", "--client-cpus", "0"),
     "fidelity: --server-cpus and --client-cpus overlap: the point of pinning is to keep them apart"),
    (("--server-cpus", "a"), "fidelity: --server-cpus / --client-cpus: invalid literal for int() with base 10: 'a'"),
    (("--client-cpus", "4096"), "fidelity: CPUs [4096] are not among this process's CPUs"),
    (("--floor", "--levels", "4"), "fidelity: --floor runs at concurrency 1 over http: add 1 to --levels and use --transport http"),
])
def test_bad_pinning_or_floor_flags_are_one_line_before_anything_starts(flags: tuple[str, ...], line: str) -> None:
    done = bench("fidelity", *flags, "--estimate")
    assert done.returncode == 2
    assert done.stderr.strip().startswith(line) and len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""
