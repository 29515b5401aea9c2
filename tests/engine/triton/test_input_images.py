"""`gpuscale-tui data from-images`: an input-data file made from a folder of photos (tiny ones
made here with Pillow), read back by our own reader against the bundled ONNX model's metadata
(written out by hand: no server), and with --raw as BYTES elements; bad folders are one line and
exit 2."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine import errors
from engine.triton.input_data import read_input_data
from engine.triton.input_images import MEAN, STD
from engine.triton.input_tensors import element
from engine.triton.request_set import data_requests
from engine.triton.target import Target, TargetInfo
from tui.cli import main

OPENCLIP = TargetInfo(model_config={}, max_batch_size=64,
                      inputs=[{"name": "image", "datatype": "FP32", "shape": [-1, 3, 224, 224]}],
                      outputs=[{"name": "embedding", "datatype": "FP32", "shape": [-1, 512]}])
COLOURS = [(200, 10, 10), (10, 200, 10), (10, 10, 200)]


def _photos(folder: Path) -> list[Path]:
    """A wide PNG, a tall PNG and a JPEG, each one colour."""
    folder.mkdir()
    sizes = [(40, 30), (20, 50), (32, 32)]
    paths = [folder / "a.png", folder / "b.png", folder / "c.jpg"]
    for path, size, colour in zip(paths, sizes, COLOURS, strict=True):
        Image.new("RGB", size, colour).save(path)
    return paths


def test_photos_become_openclip_inputs_that_our_reader_takes(tmp_path, capsys):
    _photos(tmp_path / "photos")
    out = tmp_path / "photos.json"
    assert main(["data", "from-images", str(tmp_path / "photos"), "--input", "image", "--out", str(out)]) == 0
    assert "3 entries for input 'image'" in capsys.readouterr().out
    document = json.loads(out.read_text())
    assert [list(e) for e in document["data"]] == [["image"]] * 3
    assert all(e["image"]["shape"] == [3, 224, 224] and "b64" in e["image"]["content"] for e in document["data"])
    data = read_input_data(str(out), OPENCLIP)
    assert len(data.entries) == 3 and not data.validated
    for entry, colour, exact in zip(data.entries, COLOURS, (True, True, False), strict=True):
        tensor = entry.inputs["image"]
        assert tensor.datatype == "FP32" and tensor.shape == (3, 224, 224)
        chw = np.frombuffer(tensor.raw, "<f4").reshape(3, 224, 224)
        want = (np.array(colour) / 255 - np.array(MEAN)) / np.array(STD)  # one colour: every pixel the same
        got = chw.reshape(3, -1).mean(axis=1)
        assert got == pytest.approx(want, abs=1e-4 if exact else 0.1)  # the JPEG is lossy
    requests = data_requests(Target("http://127.0.0.1:9", "openclip_vit_b32"), OPENCLIP, 2, data)
    assert requests[0].shapes == {"image": [2, 3, 224, 224]}  # batches of the entries, as perf_analyzer makes them


def test_raw_puts_each_files_bytes_as_one_bytes_element(tmp_path):
    paths = _photos(tmp_path / "photos")
    out = tmp_path / "raw.json"
    assert main(["data", "from-images", str(tmp_path / "photos"), "--input", "IMAGE", "--raw", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    for entry, path in zip(document["data"], paths, strict=True):
        assert entry["IMAGE"]["shape"] == [1]
        assert base64.b64decode(entry["IMAGE"]["content"]["b64"]) == element(path.read_bytes())


def test_a_missing_data_extra_is_one_line_but_raw_needs_none(tmp_path, capsys, monkeypatch):
    _photos(tmp_path / "photos")
    monkeypatch.setitem(errors.EXTRAS, "data", (("no_such_module_x", "pillow"),))
    args = ["data", "from-images", str(tmp_path / "photos"), "--input", "image", "--out", str(tmp_path / "x.json")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("needs pillow: pip install 'gpuscale-tui[data]'") and "\n" not in err
    assert main([*args, "--raw"]) == 0 and not list(tmp_path.glob(".*.partial"))


@pytest.mark.parametrize("case, needle", [
    ("missing", "no such folder"),
    ("empty", "no file in it (expected JPEG or PNG photos)"),
    ("not an image", "notes.txt: not a JPEG or PNG image"),
    ("a file", "not a folder"),
])
def test_a_bad_folder_is_one_line_and_exit_2(tmp_path, capsys, case, needle):
    folder = tmp_path / "photos"
    if case == "empty":
        folder.mkdir()
    elif case == "not an image":
        _photos(folder)
        (folder / "notes.txt").write_text("not a photo")
    elif case == "a file":
        folder.write_text("x")
    out = tmp_path / "out.json"
    assert main(["data", "from-images", str(folder), "--input", "image", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and err.count("\n") == 0, err
    assert not out.exists()


def test_photos_that_make_a_file_over_the_limit_are_refused(tmp_path, capsys, monkeypatch):
    from engine.triton import input_images

    _photos(tmp_path / "photos")
    monkeypatch.setattr(input_images, "MAX_DATA_BYTES", 1000)  # 2 GiB in use: what load.input_data reads
    out = tmp_path / "raw.json"
    assert main(["data", "from-images", str(tmp_path / "photos"), "--input", "IMAGE", "--raw", "--out", str(out)]) == 2
    assert "the photos make a file over" in capsys.readouterr().err and not out.exists()


# --------------------------------------------------------------------------- decompression bombs


def _png_declaring(path: Path, width: int, height: int, rows: int = 0) -> Path:
    """A PNG whose header declares ``width`` x ``height`` RGB; ``rows`` rows of zeros follow
    compressed (all of them: a real bomb, a few hundred KB declaring gigabytes), or a token IDAT."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    packer = zlib.compressobj(9)
    row = bytes(1 + 3 * width)  # filter byte 0, then the row's pixels
    body = b"".join(packer.compress(row) for _ in range(rows)) + packer.flush()
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", body) + chunk(b"IEND", b""))
    return path


@pytest.mark.slow
@pytest.mark.parametrize(("width", "rows", "needle"), [
    (30000, 0, "declares 30000 x 30000 pixels, over the limit of 64 million"),  # Pillow's own error was a traceback
    (12000, 12000, "declares 12000 x 12000 pixels"),  # was decoded whole: 1.18 GB peak, Pillow's warning on stderr
])
def test_a_decompression_bomb_is_refused_from_its_header(tmp_path, width, rows, needle):
    from tests.reliability.helpers import run_measured

    folder = tmp_path / "photos"
    folder.mkdir()
    _png_declaring(folder / "bomb.png", width, width if rows == 0 else rows, rows)
    out = tmp_path / "out.json"
    proc, peak_kib = run_measured(tmp_path, "data", "from-images", str(folder), "--input", "image", "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr  # no traceback, no Pillow warning
    assert peak_kib < 256 << 10, f"peak RSS {peak_kib >> 10} MiB"  # nothing decoded (the tool at rest: ~50 MiB)
    assert not out.exists()


@pytest.mark.slow
def test_a_large_jpeg_is_decoded_at_a_draft_scale(tmp_path):
    """80 million pixels declared, decoded at 1/8 (1250 x 1000, Pillow's draft mode): taken, and
    the peak stays far below the 240 MB its pixels would take decoded whole."""
    from tests.reliability.helpers import run_measured

    folder = tmp_path / "photos"
    folder.mkdir()
    Image.new("RGB", (10000, 8000), (90, 120, 200)).save(folder / "big.jpg", quality=50)
    out = tmp_path / "out.json"
    proc, peak_kib = run_measured(tmp_path, "data", "from-images", str(folder), "--input", "image", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads(out.read_text())["data"]
    pixels = np.frombuffer(base64.b64decode(entry["image"]["content"]["b64"]), "<f4").reshape(3, 224, 224)
    expected = (np.array([90, 120, 200]) / 255.0 - np.array(MEAN)) / np.array(STD)
    assert np.allclose(pixels[:, 112, 112], expected, atol=0.05)
    assert peak_kib < 160 << 10, f"peak RSS {peak_kib >> 10} MiB"
