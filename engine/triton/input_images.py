"""An input-data file (perf_analyzer's ``--input-data`` JSON) made from a folder of photos, for an
image model: one entry per photo, in file-name order.

- Decoded (the default, for a model that takes pixels such as the bundled OpenCLIP ViT-B/32): each
  photo in RGB, its shorter side resized to ``size`` (bicubic), the centre ``size`` x ``size``
  cropped, scaled to [0, 1] and normalised with OpenCLIP's mean and std, as FP32 in CHW order,
  written as ``{"content": {"b64": ...}, "shape": [3, size, size]}``. Needs Pillow (the ``data``
  extra).
- Raw (for a model that decodes the JPEG itself: a DALI or Python first step): each file's bytes
  as one BYTES element in perf_analyzer's serialized form (a 4-byte little-endian length, then the
  bytes), ``{"content": {"b64": ...}, "shape": [1]}``. Needs nothing beyond the core.

Anything wrong (no folder, no photo in it, a file that is not a JPEG or PNG, an image declaring
more than MAX_PIXELS) is one line (UserError). Pure apart from reading the folder: the caller writes the document.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from engine.errors import UserError, require_extra
from engine.triton.input_tensors import MAX_DATA_BYTES, element, read_file

# OpenCLIP's image normalisation (open_clip.constants OPENAI_DATASET_MEAN / _STD)
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)
MAX_PIXELS = 64_000_000  # decoded at most (RGB: 192 MB); a larger PNG, or JPEG after draft scaling, is refused
MAGIC = {b"\xff\xd8\xff": "JPEG", b"\x89PNG\r\n\x1a\n": "PNG"}


def photos(folder: Path) -> list[Path]:
    """The folder's files in name order (names starting with '.' skipped); one line if there is
    no such folder or no file in it."""
    if not folder.exists():
        raise UserError(f"{folder}: no such folder")
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder (give the folder that holds the photos)")
    try:
        found = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    except OSError as exc:
        raise UserError(f"{folder}: cannot read the folder: {exc.strerror or exc}") from None
    if not found:
        raise UserError(f"{folder}: no file in it (expected JPEG or PNG photos)")
    return found


def image_kind(raw: bytes) -> str | None:
    """'JPEG' or 'PNG' by the file's first bytes, else None."""
    return next((kind for magic, kind in MAGIC.items() if raw.startswith(magic)), None)


def _read(path: Path) -> bytes:
    raw = read_file(path, str(path.parent))  # a regular file, a bounded read
    if image_kind(raw) is None:
        raise UserError(f"{path}: not a JPEG or PNG image")
    return raw


def pixels(raw: bytes, size: int, where: Path) -> bytes:
    """One photo as the model's input: RGB, shorter side to ``size``, centre crop, [0, 1],
    OpenCLIP's mean/std, FP32 little-endian in CHW order."""
    import io

    import numpy as np
    from PIL import Image, UnidentifiedImageError

    pillows_limit, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None  # check_pixels judges, in our words
    try:
        with Image.open(io.BytesIO(raw)) as opened:  # reads the header only: nothing decoded yet
            if opened.format == "JPEG":  # decoded at 1/2, 1/4 or 1/8 scale where that still covers `size`
                opened.draft("RGB", (size, size))
            check_pixels(opened.size, where)
            image = opened.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise UserError(f"{where}: cannot decode the image: {exc}") from None
    finally:
        Image.MAX_IMAGE_PIXELS = pillows_limit
    width, height = image.size
    scale = size / min(width, height)
    resized = image.resize((max(size, round(width * scale)), max(size, round(height * scale))),
                           Image.Resampling.BICUBIC)
    left, top = (resized.width - size) // 2, (resized.height - size) // 2
    crop = resized.crop((left, top, left + size, top + size))
    hwc = np.asarray(crop, dtype=np.float32) / 255.0
    chw = (hwc - np.array(MEAN, np.float32)) / np.array(STD, np.float32)
    return np.ascontiguousarray(chw.transpose(2, 0, 1)).astype("<f4").tobytes()


def check_pixels(declared: tuple[int, int], where: Path) -> None:
    """A photo decodes to at most MAX_PIXELS (after JPEG's draft scaling), judged by the size its
    header declares: a small file may declare a huge image (a decompression bomb)."""
    width, height = declared
    if width * height > MAX_PIXELS:
        raise UserError(f"{where}: declares {width} x {height} pixels, over the limit of {MAX_PIXELS // 1_000_000} "
                        "million (a decompression bomb, or a photo to scale down first)")


def images_document(folder: Path, input_name: str, size: int = 224, raw: bool = False) -> dict[str, Any]:
    """perf_analyzer's input-data document: one entry per photo of ``folder`` for ``input_name``."""
    if not input_name:
        raise UserError("--input: name the model's input the photos go to")
    if not raw:
        require_extra("data", "decoding photos (data from-images without --raw)")
    if not 1 <= size <= 4096:
        raise UserError(f"--size: expected 1 to 4096 pixels, found {size}")
    entries, total = [], 0
    for path in photos(folder):
        content = _read(path)
        text = base64.b64encode(element(content) if raw else pixels(content, size, path)).decode()
        total += len(text)
        if total > MAX_DATA_BYTES:  # a file load.input_data would refuse
            raise UserError(f"{folder}: the photos make a file over {MAX_DATA_BYTES >> 30} GiB: use fewer")
        shape = [1] if raw else [3, size, size]
        entries.append({input_name: {"content": {"b64": text}, "shape": shape}})
    return {"data": entries}
