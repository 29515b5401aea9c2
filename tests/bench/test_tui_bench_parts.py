"""The parts the TUI's benches stand on: the synthetic GPUs (bench/synthetic_gpus.py) and the
carried textual for a GPU box without it (bench/common.py)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from bench import common
from bench.synthetic_gpus import SyntheticGpus


def test_synthetic_gpus_read_one_moving_reading_per_gpu() -> None:
    source = SyntheticGpus(8, 0.2)
    first = source.read()
    assert [r.index for r in first] == list(range(8))
    assert len({r.uuid for r in first}) == 8 and {r.source for r in first} == {"synthetic"}
    for r in first:
        assert r.util_gpu is not None and 0 <= r.util_gpu <= 100
        assert r.mem_used is not None and r.mem_total is not None and 0 < r.mem_used <= r.mem_total
    assert len({r.util_gpu for r in first}) > 1  # each GPU its own phase: rows that differ


def _wheel(folder: Path, name: str, module: str) -> None:
    with zipfile.ZipFile(folder / f"{name}-1.0-py3-none-any.whl", "w") as z:
        z.writestr(f"{module}/__init__.py", "")


def test_textual_wheels_are_unpacked_ahead_only_where_textual_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name, module in (("textual", "textual"), ("rich", "rich"), ("markdown_it_py", "markdown_it"), ("psutil", "psutil")):
        _wheel(wheels, name, module)
    target = tmp_path / "textual-site"
    monkeypatch.setattr(common, "CARRY_TEXTUAL", target)
    monkeypatch.setattr(common, "_importable", lambda module: module != "textual")
    assert common.unpack_textual(wheels)
    assert sorted(p.name for p in target.iterdir()) == ["markdown_it", "rich", "textual"]  # not psutil: not textual's
    monkeypatch.setattr(common, "_importable", lambda module: True)
    assert not common.unpack_textual(wheels)  # a box with textual keeps its own
