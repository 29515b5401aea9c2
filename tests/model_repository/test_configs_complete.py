"""Every config an embedded server may run is complete: the server starts with
--disable-auto-complete-config (engine/server/embedded.py), so Triton fills in nothing: each names
its backend or platform, its batching and every input and output with type and dims."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.server.repository import EMBEDDED_ROOT, embedded_models

CONFIGS = sorted(p for m in embedded_models() for p in (EMBEDDED_ROOT / m).glob("config*.pbtxt"))
TENSOR = re.compile(r"\{\s*name:\s*\"[^\"]+\"\s+data_type:\s*TYPE_\w+\s+(?:format:\s*\w+\s+)?dims:\s*\[[^\]]*\d[^\]]*\]")


def _code(text: str) -> str:
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def _block(text: str, key: str) -> str:
    """The bracketed list after `key` (`input [ ... ]`), nested braces and all; "" if absent."""
    match = re.search(rf"(?m)^\s*{key}\s*\[", text)
    if match is None:
        return ""
    depth, start = 0, match.end() - 1
    for i in range(start, len(text)):
        depth += {"[": 1, "]": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i + 1]
    return ""


def test_there_are_configs_to_check() -> None:
    assert len(CONFIGS) >= len(embedded_models()) >= 10


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_config_names_what_auto_complete_would_fill(path: Path) -> None:
    text = _code(path.read_text())
    assert re.search(r'(?m)^name:\s*"' + re.escape(path.parent.name) + '"', text), "its name"
    assert re.search(r'(?m)^(backend|platform):\s*"\w+"', text), "its backend or platform"
    assert re.search(r"(?m)^max_batch_size:\s*\d+", text), "max_batch_size, 0 for none"
    for key in ("input", "output"):
        block = _block(text, key)
        assert block, f"its {key} list"
        names = re.findall(r'name:\s*"', block)
        assert names and len(TENSOR.findall(block)) == len(names), f"every {key} with data_type and dims: {block}"


def test_the_check_fails_a_config_that_leaves_out_its_outputs(tmp_path: Path) -> None:
    bare = tmp_path / "identity" / "config.pbtxt"
    bare.parent.mkdir()
    bare.write_text('name: "identity"\nbackend: "python"\nmax_batch_size: 8\n'
                    'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n')
    with pytest.raises(AssertionError, match="its output list"):
        test_each_config_names_what_auto_complete_would_fill(bare)
