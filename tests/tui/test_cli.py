"""The command line: instant help without heavy imports, one-line errors with exit code 2.

Help, --version, `profiles` and the bad inputs refused while parsing run `tui.cli.main` in this
process (tests/cli_runner.py); one case of each test, the ones that import torch or run a session,
and the older Python run the real `python -m tui.cli` in a subprocess."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_runner import ROOT, run_cli, run_cli_inproc


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return run_cli(*args, timeout=timeout)


def test_help_imports_neither_torch_nor_textual():
    code = "import sys; from tui.cli import build_parser; build_parser().format_help(); " \
           "print(sorted(m for m in ('torch', 'textual', 'numpy', 'aiohttp') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("args", [["--help"], ["replay", "--help"], ["export", "--help"], ["compare", "--help"],
                                  ["model", "export", "--help"], ["server", "--help"]])
def test_help_for_every_command(args):
    proc = _run(*args) if args == ["--help"] else run_cli_inproc(*args)  # the top one through the real entry point
    assert proc.returncode == 0 and "usage: gpuscale-tui" in proc.stdout


def test_profiles_lists_one_line_each():
    lines = run_cli_inproc("profiles").stdout.splitlines()
    assert len(lines) == len(list((ROOT / "profiles").glob("*.toml")))
    assert any(line.startswith("4x_rtx4080") and "$1.20/h" in line for line in lines)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--profile", "nope", "--record"], "unknown profile 'nope'"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--record", "--set", "load.concurrency=0"], "load.concurrency: expected"),
        (["--record", "--set", "load.rates=-5", "--set", "load.mode=rate"], "load.rates: expected"),
        (["--record", "--set", "server.kind=remote", "--set", "server.url=not a url"], "server.url: expected"),
        (["replay", "--speed", "-1", "x.sqlite"], "expected a number > 0"),
        (["profiles", "--check", "/nonexistent/p.toml"], "no such profile file"),
        (["compare", "a.sqlite", "--max-p99", "32"], None),
        (["model", "export", "--weights", "/nonexistent.pt", "--arch", "vit_tiny"], "no such file"),
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path):
    # model export imports torch before it reads --weights; --bogus: the real entry point once
    cli = _run if args[0] in ("model", "--bogus") else run_cli_inproc
    proc = cli(*args, "--output", str(tmp_path)) if args[0].startswith("--") else cli(*args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gpuscale-tui")
    if needle:
        assert needle in lines[0]
    assert "Traceback" not in proc.stderr


# Standard-library modules newer than Python 3.10, with the version that brought them.
_NEW_STDLIB = {"tomllib": (3, 11)}


def _declared_min_python() -> tuple[int, int]:
    import re
    import tomllib

    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    found = re.search(r">=\s*(\d+)\.(\d+)", spec)
    assert found, spec
    return int(found.group(1)), int(found.group(2))


@pytest.mark.slow
def test_requires_python_covers_every_stdlib_module_the_code_imports():
    """pyproject's requires-python covers every stdlib module the code imports (tomllib needs 3.11)."""
    import ast

    from tui.cli import MIN_PYTHON

    needed = (3, 0)
    for path in [*ROOT.glob("engine/**/*.py"), *ROOT.glob("tui/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                needed = max(needed, _NEW_STDLIB.get(name.split(".")[0], (3, 0)))
    assert needed == (3, 11)  # the scan sees tomllib
    assert _declared_min_python() >= needed
    assert MIN_PYTHON == _declared_min_python()


def _python_310() -> str | None:
    import shutil

    for candidate in [shutil.which("python3.10"), *map(str, Path("/root/.pyenv/versions").glob("3.10*/bin/python3.10"))]:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    return None


@pytest.mark.slow
def test_an_older_python_gets_one_line_not_a_traceback():
    python = _python_310()
    if python is None:
        pytest.skip("no Python 3.10 on this machine")
    proc = subprocess.run([python, "-m", "tui.cli", "profiles"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("gpuscale-tui: error: needs Python 3.11 or newer") and proc.stderr.count("\n") == 1


PROBE_TINY = ["--set", "probe.models=mlp_258k", "--set", "probe.batch_sizes=4", "--set", "probe.world_sizes=1",
              "--set", "probe.steps=2", "--set", "probe.warmup_steps=1", "--set", "probe.repeats=2",
              "--set", "probe.allreduce=false"]


@pytest.mark.slow
@pytest.mark.xdist_group("cpu_heavy")  # torch ranks: tests/conftest.py
@pytest.mark.parametrize("server", [
    [],  # the local profile: an embedded server it must not start
    ["--set", "server.kind=remote", "--set", "server.url=http://127.0.0.1:9"],  # a remote one that is down
])
def test_probe_only_needs_no_triton(tmp_path, server):
    """--probe-only starts no server and needs none: it runs with a remote server that is down."""
    from engine.record.reader import Recording

    proc = _run("--probe-only", "--record", "--output", str(tmp_path), *server, *PROBE_TINY, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Triton" not in proc.stderr and "cannot reach" not in proc.stdout
    (path,) = tmp_path.glob("*.sqlite")
    with Recording.open(path) as rec:
        counts = rec.event_counts()
    assert counts.get("probe_result", 0) == 1 and counts.get("server_ready", 0) == 0
    assert not list(tmp_path.glob("*.logs"))  # no server log folder either


@pytest.mark.slow
def test_version_and_help_say_what_a_new_user_needs():
    """--version, and --help with the exit codes and help for the positionals and server --model."""
    version = _run("--version")  # the installed package's metadata, read by the real entry point
    assert version.returncode == 0 and re.fullmatch(r"gpuscale-tui \S+.*\n", version.stdout)
    top = run_cli_inproc("--help").stdout
    for code in ("0    ok", "1    the run failed", "2    bad input", "3    a gate failed", "130  interrupted"):
        assert code in top
    assert "exit codes:" in run_cli_inproc("compare", "--help").stdout
    for args, needle in ((("replay", "--help"), r"\n  file\s+a recording"), (("export", "--help"), r"\n  file\s+a recording"),
                         (("compare", "--help"), r"\n  FILE\s+two or more recordings"),
                         (("server", "--help"), r"--model NAME\s+a model of model_repository/")):
        assert re.search(needle, run_cli_inproc(*args).stdout), (args, needle)
