"""A perf_analyzer input-data file of tiny real JPEGs, as `data from-images --raw` writes it, with
token ids beside each for the datacheck models (their tests: our engine and perf_analyzer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def raw_photos_document(tmp_path: Path) -> tuple[dict[str, Any], list[int]]:
    """The file's document (TOKENS added to each entry) and each JPEG's size in bytes."""
    from PIL import Image

    from tui.cli import main

    photos = tmp_path / "photos"
    photos.mkdir()
    for k, size in enumerate([(16, 16), (40, 24)]):
        Image.new("RGB", size, (30 * k, 90, 160)).save(photos / f"p{k}.jpg")
    out = tmp_path / "raw.json"
    assert main(["data", "from-images", str(photos), "--input", "IMAGE", "--raw", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    for entry in document["data"]:
        entry["TOKENS"] = {"content": [101, 7592, 102], "shape": [3]}
    return document, [(photos / f"p{k}.jpg").stat().st_size for k in range(2)]
