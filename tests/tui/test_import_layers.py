"""The TUI's layers (pyproject's import-linter contract) hold for every import, those under
``if TYPE_CHECKING:`` and inside functions included: import-linter is told to skip the former
(``exclude_type_checking_imports``), and a type-only import that goes up a layer is still a
circle (screens importing the app that imports them)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TUI = ROOT / "tui"


def tui_layers() -> list[set[str]]:
    """The TUI contract's layers, top first, each a set of sibling module names."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c.get("containers") == ["tui"]]
    return [{name.strip() for name in layer.split("|")} for layer in contract["layers"]]


def imports_of(source: str) -> set[str]:
    """Every module a source names in an import statement, wherever the statement is; for
    ``from a import b`` both ``a`` and ``a.b`` (b may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def tui_imports() -> dict[str, set[str]]:
    """Each TUI module and the TUI modules it imports."""
    modules = {module_name(p): p for p in TUI.rglob("*.py")}
    return {name: {m for m in imports_of(path.read_text()) if m in modules and m != name}
            for name, path in modules.items()}


def layer_of(module: str, layers: list[set[str]]) -> tuple[int, str] | None:
    top = module.split(".")[1] if module.count(".") else ""
    for index, names in enumerate(layers):
        if top in names:
            return index, top
    return None


def test_a_type_checking_import_is_seen() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tui.app import GpuscaleApp\n"
    assert "tui.app" in imports_of(source)
    def_source = "def f():\n    from tui import glyphs\n"
    assert {"tui", "tui.glyphs"} <= imports_of(def_source)


def test_every_tui_module_is_in_a_layer() -> None:
    layers = tui_layers()
    outside = [m for m in tui_imports() if m != "tui" and layer_of(m, layers) is None]
    assert not outside, f"add these to the TUI contract's layers in pyproject.toml: {outside}"


def test_no_import_goes_up_or_sideways_a_layer() -> None:
    layers = tui_layers()
    wrong = []
    for module, imported in tui_imports().items():
        here = layer_of(module, layers)
        for other in imported:
            there = layer_of(other, layers)
            if here is None or there is None or here[1] == there[1]:
                continue  # the package itself, or within one layer's module or package
            if there[0] <= here[0]:
                wrong.append(f"{module} -> {other}")
    assert not wrong, wrong


def test_no_circle_between_tui_modules() -> None:
    graph = tui_imports()
    circles = []

    def visit(module: str, path: list[str]) -> None:
        for other in sorted(graph[module]):
            if other in path:
                circles.append(" -> ".join([*path[path.index(other):], other]))
            elif other not in done:
                visit(other, [*path, other])
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert not circles, circles
