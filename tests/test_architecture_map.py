"""docs/architecture.md's map matches the tree: every module of engine/, tui/ and
model_repository/ is named there, and every source path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
PACKAGES = ("engine", "tui", "model_repository")
# A path the doc names: `engine/load/worker.py`, `tests/engine/load/`, `bench/fidelity.py`.
NAMED = re.compile(r"`((?:engine|tui|model_repository|tests|bench|scripts|docs)/[\w/.\-]*)`")


def modules() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if path.name != "__init__.py" and "/__pycache__/" not in rel:
                found.append(rel)
    return found


def test_every_module_is_on_the_map():
    missing = [m for m in modules() if f"`{m}`" not in DOC]
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_every_path_the_map_names_exists():
    gone = sorted({p for p in NAMED.findall(DOC) if "*" not in p and not (ROOT / p.rstrip("/")).exists()})
    assert not gone, f"docs/architecture.md names paths that are not in the tree: {gone}"
