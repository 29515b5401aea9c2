"""`model export` writes an ONNX model that loads and computes what the torch model computes."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.errors import UserError
from engine.server.onnx_export import _load_vit_module, export_onnx
from tests.lazy_modules import Lazy, torch

onnx, onnxruntime = Lazy("onnx"), Lazy("onnxruntime")

HEAVY = pytest.mark.xdist_group("cpu_heavy")  # torch export: tests/conftest.py
LIGHT = pytest.mark.xdist_group("torch")  # torch, no export: tests/conftest.py


@HEAVY
@pytest.mark.slow
def test_export_small_variant_loads_and_matches_torch(tmp_path: Path):
    path = export_onnx("vit_tiny", tmp_path, model_name="vit_tiny")
    assert path == tmp_path / "vit_tiny" / "1" / "model.onnx"
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    batch_dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch_dim.dim_param == "batch"  # dynamic batch for Triton's max_batch_size

    x = np.random.default_rng(0).standard_normal((3, 3, 224, 224)).astype(np.float32)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = session.run(["embedding"], {"image": x})
    expected = _load_vit_module().build_vit("vit_tiny")(torch.from_numpy(x)).detach().numpy()
    assert got.shape == (3, 512)
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)


@HEAVY
@pytest.mark.slow
def test_openclip_architecture_has_the_vit_b32_shape():
    vit = _load_vit_module()
    model = vit.build_vit("openclip_vit_b32")
    params = sum(p.numel() for p in model.parameters())
    assert 87_000_000 < params < 89_000_000  # OpenCLIP ViT-B/32 image tower: 87.8M
    assert model(torch.zeros(1, 3, 224, 224)).shape == (1, 512)


@LIGHT
def test_openclip_checkpoint_weights_load(tmp_path):
    vit = _load_vit_module()
    source = vit.build_vit("vit_tiny", seed=1)
    checkpoint = tmp_path / "open_clip.pt"
    torch.save({f"visual.{k}": v for k, v in source.state_dict().items()}, checkpoint)
    loaded = vit.build_vit("vit_tiny", weights=str(checkpoint), seed=2)
    for key, value in source.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value)


@LIGHT
def test_bad_arch_and_weights_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="unknown architecture"):
        export_onnx("resnet9000", tmp_path)
    with pytest.raises(UserError, match="no such file"):
        export_onnx("vit_tiny", tmp_path, weights=str(tmp_path / "missing.pt"))


@HEAVY
@pytest.mark.slow
def test_cli_model_export(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "model", "export", "--arch", "vit_tiny", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "random weights" in proc.stdout
    assert (tmp_path / "vit_tiny" / "1" / "model.onnx").is_file()
