"""tests/cli_runner.py's in-process runner answers what the real `python -m tui.cli` does, puts back
what main() changes, and fails a test whose command escapes with an exception or starts real work."""

from __future__ import annotations

import signal
import threading

import pytest

from tests.cli_runner import run_cli, run_cli_inproc


@pytest.mark.parametrize("args", [["replay", "--help"], ["compare", "a.sqlite", "--max-p99", "32"], ["--bogus"]])
def test_in_process_answers_as_the_subprocess_does(args: list[str]) -> None:
    real, here = run_cli(*args, timeout=60), run_cli_inproc(*args)
    assert (here.returncode, here.stdout, here.stderr) == (real.returncode, real.stdout, real.stderr)


def test_the_stop_signals_a_command_installs_are_put_back(tmp_path) -> None:  # noqa: ANN001
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    proc = run_cli_inproc("export", str(tmp_path / "missing.sqlite"), "-f", "json")  # export: interrupt_on_term()
    assert proc.returncode == 2 and "no such recording" in proc.stderr, proc.stderr
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_an_exception_escaping_main_fails_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.cli

    def broken(_args: object) -> int:
        raise RuntimeError("a bug: a traceback in a subprocess")

    monkeypatch.setitem(tui.cli.COMMANDS, "profiles", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        run_cli_inproc("profiles")


def test_a_command_that_starts_a_thread_is_sent_to_a_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.cli

    def working(_args: object) -> int:
        thread = threading.Thread(target=lambda: None, name="session-like")
        thread.start()
        thread.join()
        return 0

    monkeypatch.setitem(tui.cli.COMMANDS, "profiles", working)
    with pytest.raises(AssertionError, match="started threads.*session-like.*run it in a subprocess"):
        run_cli_inproc("profiles")
