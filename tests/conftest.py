"""Fixtures for every test folder: one real embedded Triton (identity model, CPU) for the whole
session. Tests that only need a server to talk to share it (start and graceful stop cost about
5 s); tests that stop, kill, freeze or reconfigure a server start their own.

scripts/test.sh runs the suite on TEST_WORKERS pytest-xdist workers (--dist loadgroup); each is its
own session, with its own identity server. Tests that keep several cores busy for seconds carry
one of two groups, each run one after another in one worker (the longest work is handed out
first: tests/schedule.py): xdist_group("cpu_heavy") the torch ranks and the torch export,
xdist_group("cpu_study") the CPU studies and fleets. In one chain they were the run's critical path (145 CPU-s, about
400 s in one worker beside seven others); two chains side by side halve it. The other
tests that import torch (about 1.5 s of CPU, in each worker that does) or scipy.stats (0.9 s) carry
xdist_group("torch"): one worker imports them for all of them."""

from __future__ import annotations

import gc
import glob
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.cli_zygote import CLIENT, SOCKET_ENV, SWITCH_ENV, Zygote, cli_args
from tests.schedule import known_seconds, longest_first, record_if_asked

if TYPE_CHECKING:
    from tests.openai_server.llama_server import OpenAIServer


# The suite's small models (identity, accumulator, datacheck, mixed) sleep this long in each execute
# in every server the suite starts (its environment reaches the servers and their stubs: e.g.
# model_repository/embedded/identity/1/model.py). Unpaced, a closed-loop sweep makes Triton and its
# stub answer as fast as two cores allow, and those answers were a third of the suite's CPU; paced,
# a sweep of the same length costs a fraction of it. At 5 ms the servers and their stubs spent 106
# CPU-s in a whole run, against 117 at 2 ms; at 10 ms 82, but the run was no shorter (the tests that
# need so many answers wait for them instead). Tests marked `unpaced` need
# the client to be the limit (client-bound verdicts, perf_analyzer's parity): their own servers
# start without it, and `unpaced_identity_server` is a session server at full speed.
MODEL_PACE = "GPUSCALE_MODEL_PACE_MS"
os.environ.setdefault(MODEL_PACE, "5")
SUITE_PACE_MS = float(os.environ[MODEL_PACE])  # what the suite's servers sleep, also where set from outside


@pytest.fixture(scope="session")
def identity_server(tmp_path_factory):
    from engine.server.embedded import EmbeddedServer

    with EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path_factory.mktemp("triton-identity")) as srv:
        yield srv


@pytest.fixture(scope="session")
def unpaced_identity_server(tmp_path_factory):
    from engine.server.embedded import EmbeddedServer

    server = EmbeddedServer(model="identity", variant="cpu", log_dir=tmp_path_factory.mktemp("triton-identity-unpaced"))
    pace = os.environ.pop(MODEL_PACE, None)
    try:
        server.start()
    finally:
        if pace is not None:
            os.environ[MODEL_PACE] = pace
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _unpaced_where_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("unpaced") is not None:
        monkeypatch.delenv(MODEL_PACE, raising=False)


# The model shapes of Triton users' models, all in one server (a start costs seconds): datacheck
# (content checks: only real data passes) without batching, behind an ensemble and a BLS model, and
# `mixed` (every datatype, a variable dimension, an optional input; any values pass) with and
# without batching. The ensemble brings its steps (datacheck, datacheck_label) with it.
SHAPE_MODELS = ("datacheck", "datacheck_nobatch", "datacheck_ensemble", "datacheck_bls", "mixed", "mixed_nobatch")


@pytest.fixture(scope="session")
def shapes_server(tmp_path_factory):
    from engine.server.embedded import EmbeddedServer

    with EmbeddedServer(model=SHAPE_MODELS[0], variant="cpu", extra_models=SHAPE_MODELS[1:],
                        log_dir=tmp_path_factory.mktemp("triton-shapes")) as srv:
        yield srv


# The real OpenAI-compatible server (llama.cpp's llama-server) serving a tiny llama model written
# at test time: tests/openai_server/ has the model's generator and the server's start and stop;
# docs/results/openai_server_choice.md says why this server. Skipped, saying what to run, where
# the binary or the gguf package is missing.
@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny llama GGUF, written for this session (about 0.6 MB, well under a second)."""
    if importlib.util.find_spec("gguf") is None:
        pytest.skip("the gguf package (it writes the tiny model) is not installed: pip install gguf")
    from tests.openai_server import tiny_model

    return tiny_model.write(tmp_path_factory.mktemp("tiny-gguf") / "tiny-llama.gguf")


@pytest.fixture(scope="session")
def openai_server(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenAIServer]:
    """A real OpenAI-compatible server (llama.cpp's llama-server) on loopback, serving the tiny
    model: `.base_url` is http://127.0.0.1:PORT/v1 and `.model` the name to send."""
    from tests.openai_server.llama_server import BUILD_HINT, find_llama_server, run_llama_server

    binary = find_llama_server()
    if binary is None:
        pytest.skip(f"no llama-server binary ($LLAMA_SERVER, ~/.cache/gpuscale-tui/llama-server/, PATH): {BUILD_HINT}")
    # --metrics: its /metrics page (the prefix cache's counters, engine/openai/server_metrics.py);
    # --slot-save-path: its slots' erase action (load.cache_reset)
    slots = tmp_path_factory.mktemp("llama-slots")
    with run_llama_server(binary, tiny_gguf, tmp_path_factory.mktemp("llama-server"),
                          extra_args=("--metrics", "--slot-save-path", str(slots))) as srv:
        yield srv


def _collect_garbage_less() -> None:
    """The objects made at collection (modules, tests, fixtures) are kept out of every later
    collection, and cyclic garbage is collected less often: the Textual apps the tests drive make
    much of it, and the default thresholds spent about a tenth of a TUI test's time collecting."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


# Fixtures whose use means the test talks to a real server (tritonserver, or llama.cpp's
# llama-server for the OpenAI API): such a test is a server test
# whether or not it says so (the fast lane, `scripts/test.sh --fast`, leaves them out).
SERVER_FIXTURES = frozenset({"identity_server", "unpaced_identity_server", "identity_info", "shapes_server", "openai_server", "toy_llm"})


# Session fixtures that start a server of their own, for a few modules' tests: those tests run in one
# xdist worker (below), so that the server starts once rather than once in every worker.
SHARED_SERVER_FIXTURES = ("shapes_server", "toy_llm", "openai_server", "unpaced_identity_server")


def _fixture_group(item: pytest.Item) -> str | None:
    """The xdist group that makes this test's costly fixture once: a module-scoped fixture (a
    server, a recorded session) groups its module's tests, a shared server's fixture the tests
    that use it. xdist hands each group to one worker; without one, a module's tests spread over
    every worker and each made the fixture again."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    names = info.names_closure
    for name in SHARED_SERVER_FIXTURES:
        if name in names:
            return name
    for name in names:
        defs = info.name2fixturedefs.get(name) or ()
        if defs and defs[-1].scope == "module":
            return item.nodeid.split("::")[0]
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    grouped = config.pluginmanager.has_plugin("xdist")  # not in the install lane (-p no:xdist)
    for item in items:
        # xdist joins a test's group names into one more group ("cpu_heavy_torch") that no one meant
        names = {mark.args[0] if mark.args else mark.kwargs.get("name") for mark in item.iter_markers("xdist_group")}
        if len(names) > 1:
            raise pytest.UsageError(f"{item.nodeid}: more than one xdist_group ({', '.join(sorted(map(str, names)))})")
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)
        if grouped and item.get_closest_marker("xdist_group") is None and (group := _fixture_group(item)) is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    longest_first(items, known_seconds())


@pytest.fixture(autouse=True)
def _fast_lane_starts_no_server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a run that leaves server tests out, a test that starts a tritonserver in this process
    is missing its `server` mark: it fails and says so, so the fast lane stays fast and honest."""
    if "not server" not in (request.config.option.markexpr or ""):
        return
    from engine.server.embedded import EmbeddedServer

    def refuse(self: EmbeddedServer) -> EmbeddedServer:
        raise AssertionError(f"{request.node.nodeid} starts a real tritonserver: mark it @pytest.mark.server")

    monkeypatch.setattr(EmbeddedServer, "start", refuse)


_NOISE_RULE: dict[str, Any] = {}  # the rule's own functions, for the tests marked `noise`


@pytest.fixture(scope="session", autouse=True)
def _box_noise_rule_off() -> Iterator[None]:
    """The suite runs on a shared 2-core box where others always take much of the CPU: a sweep
    in this process would mark every level contended and measure it again, and a test of the
    engine's figures would read the box's noise instead. The rule is switched off for the whole
    session, module and session fixtures' sweeps included, except in tests marked `noise`
    (_box_noise_rule_where_marked), which test it under hogs they start themselves."""
    import engine.load.sweep as sweep
    from engine.load.trials import Trials

    _NOISE_RULE.update(is_contended=sweep.is_contended, room=Trials.room)
    patch = pytest.MonkeyPatch()
    patch.setattr(sweep, "is_contended", lambda *args: False)
    patch.setattr(Trials, "room", lambda self, trial, took_s: False)
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def _box_noise_rule_where_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("noise") is None:
        return
    import engine.load.sweep as sweep
    from engine.load.trials import Trials

    monkeypatch.setattr(sweep, "is_contended", _NOISE_RULE["is_contended"])
    monkeypatch.setattr(Trials, "room", _NOISE_RULE["room"])


# --------------------------------------------------------------------------- the CLI zygote

_zygote: Zygote | None = None
_zygote_here = {"on": False}  # whether the running test lets the CLI come from the zygote
_popen_init = subprocess.Popen.__init__


def _through_zygote(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
    """Popen, with `python -m tui.cli ...` started through this worker's zygote
    (tests/cli_zygote.py) where the running test allows it."""
    cli = cli_args(args)
    if cli is not None and _zygote is not None and _zygote_here["on"]:
        path = _zygote.ready(subprocess.Popen)
        if path is not None:
            env = dict(os.environ if kwargs.get("env") is None else kwargs["env"])
            env[SOCKET_ENV] = path
            kwargs["env"] = env
            args = [sys.executable, "-S", str(CLIENT), *cli]
    _popen_init(self, args, *rest, **kwargs)


@pytest.fixture(autouse=True)
def _cli_zygote_where_allowed(request: pytest.FixtureRequest) -> Iterator[None]:
    _zygote_here["on"] = request.node.get_closest_marker("real_cli") is None
    try:
        yield
    finally:
        _zygote_here["on"] = False


def _start_zygote_if_on() -> None:
    global _zygote
    if os.environ.get(SWITCH_ENV, "1") == "0":
        return
    _zygote = Zygote()
    subprocess.Popen.__init__ = _through_zygote  # type: ignore[method-assign]


# --------------------------------------------------------------------------- leftovers of the suite

_LEFTOVER_GLOBS = ("/dev/shm/triton_python_backend_shm_region_*", f"{tempfile.gettempdir()}/gpuscale-*")
_at_start: set[str] = set()


def _leftovers() -> set[str]:
    return {path for pattern in _LEFTOVER_GLOBS for path in glob.glob(pattern)}


def _in_use() -> str:
    """Every live process's mappings and command line: a region mapped or a folder named there
    belongs to a server still running (another user's, or a worker's still finishing)."""
    parts = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            for name in ("maps", "cmdline"):
                try:
                    parts.append((proc / name).read_bytes().decode(errors="replace").replace("\0", " "))
                except OSError:
                    pass
    return "\n".join(parts)


def pytest_configure(config: pytest.Config) -> None:
    record_if_asked(config)
    _start_zygote_if_on()


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        _at_start.update(_leftovers())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No Python-backend shared memory and no /tmp/gpuscale-* left by the suite: what is new
    since the start, and used by no live process, fails the run."""
    if hasattr(session.config, "workerinput"):
        return  # each xdist worker is a session; the controller looks once all have finished
    from engine.shm_segments import owner_alive

    in_use = _in_use()
    # a region whose tool still runs is its to remove (the install lane runs beside the main lane,
    # whose servers come and go: a guard killed on purpose leaves its regions to its tool's stop)
    left = sorted(p for p in _leftovers() - _at_start if Path(p).name not in in_use and p not in in_use
                  and not owner_alive(Path(p).name))
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = [f"the suite left {len(left)} file(s) behind:", *(f"  {p}" for p in left[:20])]
        if reporter is not None:
            reporter.write_line("")
            reporter.write_line("\n".join(lines), red=True)
        else:
            print("\n".join(lines))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_finish(session: pytest.Session) -> None:
    """No torch or scipy.stats at collection: every xdist worker collects every file, and these
    take ~2.5 s of CPU each to import. Import them where they are used (tests/lazy_modules.py)."""
    import sys

    heavy = [name for name in ("torch", "scipy.stats") if name in sys.modules]
    if heavy:
        raise pytest.UsageError(f"collecting the tests imported {', '.join(heavy)}: import it in the tests that "
                                "use it (tests/lazy_modules.py)")
    _collect_garbage_less()
