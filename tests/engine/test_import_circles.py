"""No two modules import each other, not even for type hints or inside a function.

import-linter's contracts (pyproject.toml) skip TYPE_CHECKING imports, and a function-local
import hides a circle from both it and the reader. This test reads every import statement of
engine/ and tui/ from the source (ast), wherever it stands, and fails on a 2-module circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "tui")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imported(module: str, path: Path, known: Iterable[str]) -> set[str]:
    """The project's modules that ``module`` imports anywhere in its source: at the top, under
    TYPE_CHECKING, inside functions. ``from a import b`` names a.b when that is a module, else a."""
    known = set(known)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # import a.b.c: the deepest module of ours
                target = target.rpartition(".")[0]
            if target and target != module:
                found.add(target)
    return found


def import_graph(collapse: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """Module -> the modules it imports; a package in ``collapse`` stands for all its modules."""
    modules = all_modules()

    def node(name: str) -> str:
        return next((c for c in collapse if name == c or name.startswith(c + ".")), name)

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(node(name), set())
        edges.update(node(t) for t in imported(name, path, modules) if node(t) != node(name))
    return graph


def two_module_circles(graph: dict[str, set[str]], prefix: str) -> list[tuple[str, str]]:
    return sorted((a, b) for a, edges in graph.items() for b in edges
                  if a < b and a.startswith(prefix) and b.startswith(prefix) and a in graph.get(b, set()))


@pytest.mark.slow
def test_the_graph_sees_type_checking_and_function_local_imports():
    # tui/app.py imports the recording reader inside a method and the replay source under
    # TYPE_CHECKING: a graph that missed either would pass the checks below for nothing
    edges = import_graph()["tui.app"]
    assert {"engine.record.reader", "engine.record.replay_source"} <= edges


@pytest.mark.parametrize(("a", "b"), [
    ("engine.modes", "engine.profiles"),
    ("engine.record.reader", "engine.record.summary"),
])
@pytest.mark.slow
def test_named_engine_circles_are_gone(a: str, b: str):
    graph = import_graph()
    assert not (b in graph[a] and a in graph[b]), f"{a} and {b} import each other"


@pytest.mark.slow
def test_no_two_engine_modules_import_each_other():
    assert two_module_circles(import_graph(), "engine.") == []


@pytest.mark.slow
def test_the_app_and_its_screens_do_not_import_each_other():
    graph = import_graph(collapse=("tui.screens",))
    assert not ("tui.screens" in graph["tui.app"] and "tui.app" in graph["tui.screens"]), \
        "tui.app and tui.screens import each other"
