"""The session conducts: short enough to read in one sitting, it never listens to its own bus
(the run's end is engine/outcome.py's, from what was published) and never rewrites a part's
event (the sweep marks its own levels)."""

from __future__ import annotations

import re
from pathlib import Path

SESSION = Path(__file__).resolve().parents[2] / "engine" / "session.py"


def test_the_session_reads_in_one_sitting() -> None:
    assert len(SESSION.read_text(encoding="utf-8").splitlines()) <= 400


def test_the_session_subscribes_only_its_recorder_and_rewrites_no_event() -> None:
    text = SESSION.read_text(encoding="utf-8")
    assert re.findall(r"bus\.subscribe\(([^)]*)\)", text) == ["self._recorder"]
    assert not re.search(r"replace\(\s*event\b", text)
