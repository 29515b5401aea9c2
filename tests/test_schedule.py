"""The order the suite's work is handed out (tests/schedule.py): the longest units first, a group
whole, the tests of unknown length after, modules with slow or server tests first among them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.schedule import SECONDS_FILE, known_seconds, longest_first

ROOT = Path(__file__).resolve().parents[1]


class Item:
    """As much of a pytest item as the order reads: its id, its group, its marks."""

    def __init__(self, nodeid: str, group: str | None = None, *marks: str) -> None:
        self.nodeid = nodeid
        self._marks = {m: SimpleNamespace(args=(), kwargs={}) for m in marks}
        if group:
            self._marks["xdist_group"] = SimpleNamespace(args=(group,), kwargs={})

    def iter_markers(self, name: str) -> list[Any]:
        return [self._marks[name]] if name in self._marks else []

    def get_closest_marker(self, name: str) -> Any:
        return self._marks.get(name)


def test_the_longest_units_go_first_a_group_whole_and_the_unknown_after() -> None:
    items = [Item("tests/a.py::t1"), Item("tests/b.py::g1", "chain"), Item("tests/c.py::fast"),
             Item("tests/d.py::long"), Item("tests/b.py::g2", "chain"), Item("tests/e.py::new", None, "slow")]
    seconds = {"tests/a.py::t1": 3.0, "tests/b.py::g1": 4.0, "tests/b.py::g2": 5.0, "tests/d.py::long": 20.0}
    longest_first(items, seconds)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == ["tests/d.py::long", "tests/b.py::g1", "tests/b.py::g2", "tests/a.py::t1",
                                         "tests/e.py::new", "tests/c.py::fast"]


def test_the_seconds_file_names_tests_of_modules_that_exist() -> None:
    seconds = known_seconds()
    assert seconds, f"{SECONDS_FILE} is missing or empty"
    modules = {nodeid.split("::")[0] for nodeid in seconds}
    missing = sorted(m for m in modules if not (ROOT / m).is_file())
    assert not missing, f"{SECONDS_FILE.name} names modules that are gone: {missing[:5]} (write it again: tests/schedule.py)"
    assert all(v >= 1.0 for v in seconds.values())


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]"])
def test_a_seconds_file_that_cannot_be_read_weighs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           text: str) -> None:
    bad = tmp_path / "seconds.json"
    bad.write_text(text)
    monkeypatch.setattr("tests.schedule.SECONDS_FILE", bad)
    assert known_seconds() == {}
