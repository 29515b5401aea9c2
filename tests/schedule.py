"""The order xdist hands out the suite's work: the longest units first (a unit is an xdist group,
run whole in one worker, or a test of no group), by each test's seconds in a whole run of the
suite (tests/data/test_seconds.json). Longest first leaves the short tests to fill the end: in
collection order the run ended with one worker alone on 40 s of tmux and time-left tests while
the seven others had finished.

Tests the file does not know weigh nothing: among them, the modules with a `slow` or `server`
test go first. Write the file again after a whole run:
``GPUSCALE_TEST_SECONDS_OUT=tests/data/test_seconds.json bash scripts/test.sh``."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

SECONDS_FILE = Path(__file__).parent / "data" / "test_seconds.json"
OUT_ENV = "GPUSCALE_TEST_SECONDS_OUT"
KEPT_S = 1.0  # the file keeps the tests that took this long or more: the others weigh nothing


def known_seconds() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(SECONDS_FILE.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _unit(item: pytest.Item) -> str:
    marks = list(item.iter_markers("xdist_group"))
    if marks:
        return str(marks[0].args[0] if marks[0].args else marks[0].kwargs.get("name"))
    return item.nodeid


def longest_first(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """Sort ``items`` in place: units by their tests' seconds, longest first; the unknown ones
    after, modules with a slow or server test first; collection order within each."""
    weight: dict[str, float] = defaultdict(float)
    for item in items:
        weight[_unit(item)] += seconds.get(item.nodeid, 0.0)
    heavy = {item.nodeid.split("::")[0] for item in items
             if item.get_closest_marker("slow") is not None or item.get_closest_marker("server") is not None}
    items.sort(key=lambda item: (-weight[_unit(item)], item.nodeid.split("::")[0] not in heavy))


class SecondsRecorder:
    """On the controller: each test's seconds (setup, call and teardown), written at the end."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid.split("@")[0]] += report.duration  # xdist appends "@group"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        kept = {k: round(v, 1) for k, v in sorted(self.seconds.items()) if v >= KEPT_S}
        self.out.write_text(json.dumps(kept, indent=0) + "\n")


def record_if_asked(config: pytest.Config) -> None:
    if (out := os.environ.get(OUT_ENV)) and not hasattr(config, "workerinput"):
        config.pluginmanager.register(SecondsRecorder(Path(out)), "gpuscale-test-seconds")
