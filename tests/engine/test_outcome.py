"""How a run ends, as a truth table of engine/outcome.py's pure function, and the ledger that
folds the published events into its facts."""

from __future__ import annotations

import pytest

from engine import events as ev
from engine.errors import RunFailed, UserError
from engine.outcome import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_GATES,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Outcome,
    RunFacts,
    RunLedger,
    outcome,
)

STOPPED = dict(stop_asked=True)  # headless: any stop interrupts
EVERYTHING_WRONG = dict(record_error="recording stopped: disk full", fatal_error="server: exited",
                        stop_asked=True, level_statuses=("failed",), incomplete="ended early", gate_failures=("p99",))

TABLE = [
    # (what happened, facts, the end)
    ("a clean run", RunFacts(level_statuses=("stable", "stable"), planned_levels=2), Outcome("ok", None, EXIT_OK)),
    ("nothing measured (probe only)", RunFacts(), Outcome("ok", None, EXIT_OK)),
    ("every level unstable", RunFacts(level_statuses=("unstable", "unstable"), planned_levels=2),
     Outcome("ok", "no level was stable (0 of 2): measure again before sizing on these figures", EXIT_OK)),
    ("bad input raised", RunFacts(raised=UserError("load.levels: bad"), **EVERYTHING_WRONG),
     Outcome("failed", "load.levels: bad", EXIT_BAD_INPUT)),
    ("a part refused to run", RunFacts(raised=RunFailed("server did not start"), **EVERYTHING_WRONG),
     Outcome("failed", "server did not start", EXIT_FAILED)),
    ("an internal error", RunFacts(raised=KeyError("x")), Outcome("failed", "KeyError: 'x'", EXIT_FAILED)),
    ("the recording stopped", RunFacts(**EVERYTHING_WRONG), Outcome("failed", "recording stopped: disk full", EXIT_FAILED)),
    ("the server died, then a stop", RunFacts(fatal_error="server: exited", stop_asked=True, level_statuses=("failed",)),
     Outcome("failed", "server: exited", EXIT_FAILED)),
    ("Ctrl-C headless, a level failed before", RunFacts(level_statuses=("failed", "interrupted"), **STOPPED),
     Outcome("interrupted", None, EXIT_INTERRUPTED)),
    ("quit in the TUI during a job", RunFacts(stop_asked=True, interactive=True, stopped_mid_job=True),
     Outcome("interrupted", None, EXIT_INTERRUPTED)),
    ("quit in the TUI while idle", RunFacts(stop_asked=True, interactive=True, level_statuses=("stable",)),
     Outcome("ok", None, EXIT_OK)),
    ("quit in the TUI while idle, a level had failed",
     RunFacts(stop_asked=True, interactive=True, level_statuses=("stable", "failed"), planned_levels=2),
     Outcome("failed", "1 of 2 levels failed", EXIT_FAILED)),
    ("a level failed, others not run", RunFacts(level_statuses=("stable", "failed"), planned_levels=4),
     Outcome("failed", "1 of 4 levels failed (2 not run)", EXIT_FAILED)),
    ("a level failed, its first error on the last line",
     RunFacts(level_statuses=("stable", "failed"), planned_levels=4,
              first_failure=(16.0, "sequence_dropped: sequence 7 was dropped by the server (idle timeout) " * 3)),
     Outcome("failed", "1 of 4 levels failed (2 not run; level 16: "
             + ("sequence_dropped: sequence 7 was dropped by the server (idle timeout) " * 3)[:90] + ")", EXIT_FAILED)),
    ("ended early on its own", RunFacts(level_statuses=("stable",), planned_levels=3, incomplete="the sweep ended "
                                        "after 1 of 3 levels", gate_failures=("p99",)),
     Outcome("failed", "the sweep ended after 1 of 3 levels", EXIT_FAILED)),
    ("a level missed a server", RunFacts(level_statuses=("stable", "stable"), planned_levels=2,
                                          degraded=((8.0, "ep2 answered nothing in 2 of 3 windows"),),
                                          gate_failures=("p99",)),
     Outcome("failed", "1 level(s) degraded, missing an endpoint (level 8: ep2 answered nothing in 2 of 3 windows)",
             EXIT_FAILED)),
    ("a scale-out's server died, its levels degraded",
     RunFacts(level_statuses=("stable",), planned_levels=1, degraded=((8.0, "ep2 answered nothing in 3 of 3 windows"),),
              servers_lost=("server 2 of 2 (GPU 1) (ep2) exited (tritonserver killed by SIGSEGV (signal 11))",)),
     Outcome("failed", "server 2 of 2 (GPU 1) (ep2) exited (tritonserver killed by SIGSEGV (signal 11)); 1 level(s) "
             "degraded, missing an endpoint (level 8: ep2 answered nothing in 3 of 3 windows)", EXIT_FAILED)),
    ("a scale-out's server died, a level failed", RunFacts(level_statuses=("failed",), planned_levels=2,
                                                           servers_lost=("server 2 of 2 (ep2) exited (x)",)),
     Outcome("failed", "server 2 of 2 (ep2) exited (x); 1 of 2 levels failed (1 not run)", EXIT_FAILED)),
    ("a gate failed", RunFacts(level_statuses=("stable",), planned_levels=1, gate_failures=("p99 12 > 10", "tput")),
     Outcome("failed", "2 gate(s) failed: p99 12 > 10; tput", EXIT_GATES)),
]


@pytest.mark.parametrize(("facts", "end"), [(f, e) for _, f, e in TABLE], ids=[name for name, _, _ in TABLE])
def test_the_end_of_a_run_is_a_function_of_its_facts(facts: RunFacts, end: Outcome) -> None:
    assert outcome(facts) == end


@pytest.mark.parametrize("facts", [f for _, f, _ in TABLE], ids=[name for name, _, _ in TABLE])
def test_a_run_that_did_not_finish_never_ends_ok(facts: RunFacts) -> None:
    unfinished = (facts.raised is not None or facts.record_error or facts.fatal_error or facts.incomplete or facts.degraded
                  or "failed" in facts.level_statuses or facts.gate_failures
                  or (facts.stop_asked and (not facts.interactive or facts.stopped_mid_job)))
    end = outcome(facts)
    assert (end.status == "ok") == (not unfinished) and (end.exit_code == EXIT_OK) == (end.status == "ok")


def _level(status: str) -> ev.LevelResult:
    return ev.LevelResult(mode="concurrency", level=1.0, index=0, status=status, batch_size=1, windows=1,
                          merged_windows=1, requests=1, errors=0, throughput_rps=1.0, throughput_ips=1.0,
                          latency=ev.LatencyStats(count=1))


def test_the_ledger_keeps_levels_the_first_fatal_error_and_the_recorders_own() -> None:
    ledger = RunLedger()
    ledger.apply(ev.Error(source="load", message="a level failed"))  # not fatal: not a dead part
    assert ledger.fatal_error is None and not ledger.measured
    ledger.apply(_level("stable"))
    ledger.apply(ev.Error(source="server", message="exited", fatal=True))
    ledger.apply(_level("failed"))
    ledger.apply(ev.Error(source="record", message="recording stopped: disk full", fatal=True))
    assert ledger.statuses() == ("stable", "failed") and ledger.measured
    assert ledger.fatal_error == "server: exited"  # the first part that died
    assert ledger.record_error == "recording stopped: disk full"  # whenever it came, it decides first
