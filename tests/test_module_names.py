"""Names that say one thing: no two modules of the product share a name that says nothing on its
own (report, export, replay, runner, plan), and no production code reads a diagnosis switch."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "tui", "model_repository")
VAGUE = {"report.py", "export.py", "replay.py", "runner.py", "plan.py"}


def sources() -> list[Path]:
    return [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts]


def test_no_vague_name_is_used_twice_or_at_all():
    names = Counter(p.name for p in sources())
    assert not {n: c for n, c in names.items() if n in VAGUE}, "rename: a module's name says what it does"


def test_no_diagnosis_switch_is_read_by_the_product():
    switch = re.compile(r"GPUSCALE_\w*DIAG")
    readers = [str(p.relative_to(ROOT)) for p in sources() if switch.search(p.read_text(encoding="utf-8"))]
    pbtxt = [str(p.relative_to(ROOT)) for p in (ROOT / "model_repository").rglob("*.pbtxt")
             if switch.search(p.read_text(encoding="utf-8"))]
    assert not readers + pbtxt


def test_the_code_names_no_issue_and_no_past_run():
    # results and their stories live in docs/results; the code says what and why
    history = re.compile(r"\b[Ii]ssues? #?\d+|\b[Ss]ession \d+\b|\bcall \d+ of\b|\(call \d+\)")
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sources()
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if history.search(line)]
    assert not found, found
