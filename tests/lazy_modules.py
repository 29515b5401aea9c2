"""Heavy modules (torch) imported on first use, not when pytest collects a test file: every
xdist worker collects every file, and torch alone takes ~2 s of CPU to import."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


class Lazy(ModuleType):
    """Stands for module ``name``: its first attribute read imports it."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # pytest's probes of a module's names (__test__, _pytestfixturefunction)
            raise AttributeError(attr)
        return getattr(importlib.import_module(self.__name__), attr)


torch: Any = Lazy("torch")


class LazyFile(ModuleType):
    """Stands for the module in file ``path`` (a model repository's, not on sys.path), loaded
    as ``name`` on its first attribute read."""

    def __init__(self, name: str, path: Path) -> None:
        super().__init__(name)
        self.__path = path

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        module = sys.modules.get(self.__name__)
        if module is None:
            spec = importlib.util.spec_from_file_location(self.__name__, self.__path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[self.__name__] = module
            spec.loader.exec_module(module)
        return getattr(module, attr)
