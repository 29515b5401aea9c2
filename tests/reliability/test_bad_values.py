"""Values that cannot be measured with, in flags and profiles: infinite, NaN, huge or malformed
numbers, NaN gates, a bind that is not an address, a rate too slow for one request per window, a
gate level that is not a number, a key named like a secret. Each is one line and exit code 2.

Refused while parsing: `tui.cli.main` in this process (tests/cli_runner.py), one case of each kind
of command line through the real `python -m tui.cli`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_runner import run_cli, run_cli_inproc
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.reliability.test_bad_input import assert_one_line_exit_2


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = SyntheticRun(levels=[1, 4], windows_per_level=2, gpu_count=1, variant="1x")
    return record_events(tmp_path_factory.mktemp("r2") / "run.sqlite", synthetic_session(run))


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--set", "load.warmup_s=inf"], "load.warmup_s: expected a finite number"),
        (["--set", "load.request_timeout_s=inf"], "load.request_timeout_s: expected a finite number"),
        (["--set", "load.request_timeout_s=nan"], "load.request_timeout_s: expected a finite number"),
        (["--set", "load.window_ms=100000000000000000000000000"], "load.window_ms: expected a value up to"),
        (["--set", "server.kind=remote", "--set", "server.url=http://[::1"], "server.url: expected"),
        (["--set", "server.bind_address=not an address"], "server.bind_address: expected an IP address"),
    ],
)
@pytest.mark.slow
def test_inf_nan_huge_and_malformed_values_are_refused(flags, needle, tmp_path):
    cli = run_cli if flags == ["--set", "load.warmup_s=inf"] else run_cli_inproc  # one through the real entry point
    proc = cli("--record", "--output", str(tmp_path), *flags)
    assert_one_line_exit_2(proc, needle)
    assert not list(tmp_path.glob("*.sqlite"))


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--min-throughput", "nan"], "expected a number > 0, found 'nan'"),
        (["--min-efficiency", "nan"], "expected a number > 0, found 'nan'"),
        (["--min-throughput", "inf"], "expected a number > 0, found 'inf'"),
        (["--max-p99", "2=nan"], "the limit must be a finite number"),
    ],
)
@pytest.mark.slow
def test_nan_gates_are_refused(flags, needle, recording):
    cli = run_cli if flags == ["--min-throughput", "nan"] else run_cli_inproc  # one through the real entry point
    assert_one_line_exit_2(cli("compare", str(recording), *flags), needle)


@pytest.mark.slow
def test_server_bind_that_is_not_an_address_is_one_line():
    assert_one_line_exit_2(run_cli("server", "--bind", "not an address"), "--bind: expected an IP address")


def test_a_rate_too_slow_for_one_request_per_window_is_refused(tmp_path):
    proc = run_cli_inproc("--record", "--output", str(tmp_path), "--set", "load.mode=rate", "--set", "load.rates=0.0001")
    assert_one_line_exit_2(proc, "load.rates: expected rates of at least")
    assert "found 0.0001/s" in proc.stderr


def test_a_p99_gate_whose_level_is_not_a_number_fails_the_profile_check(tmp_path):
    profile = tmp_path / "gates.toml"
    profile.write_text('[gates]\nmax_p99_ms = { "abc" = 5 }\n')
    assert_one_line_exit_2(run_cli("profiles", "--check", str(profile)), "gates.max_p99_ms: expected a table of level")


def test_a_key_named_like_a_secret_keeps_its_unknown_key_message(tmp_path):
    profile = tmp_path / "p.toml"
    profile.write_text('[server]\npassword = "hunter2hunter2"\n')
    proc = run_cli_inproc("profiles", "--check", str(profile))  # the gate case above: the real entry point
    assert_one_line_exit_2(proc, "server.password: unknown key")
    assert "hunter2hunter2" not in proc.stderr
