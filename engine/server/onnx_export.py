"""`gpuscale-tui model export`: write the ViT image encoder as ONNX for Triton's ONNX Runtime backend.

Real OpenCLIP weights when the user has them (``--weights``), otherwise the same architecture with
random weights: throughput does not depend on weight values, and reports say which it was.
"""

from __future__ import annotations

import sys
from pathlib import Path

from engine.errors import UserError, require_extra
from engine.server.repository import REPOSITORY_ROOT


def _load_vit_module():  # model_repository/vit.py is plain torch, shared with the served models
    sys.path.insert(0, str(REPOSITORY_ROOT))
    try:
        import vit  # noqa: PLC0415
    finally:
        sys.path.remove(str(REPOSITORY_ROOT))
    return vit


def export_onnx(arch: str, out_repository: Path, *, weights: str | None = None, opset: int = 17,
                model_name: str | None = None) -> Path:
    """Write <out_repository>/<model_name>/1/model.onnx with a dynamic batch dimension."""
    require_extra("model", "model export")
    import torch

    vit = _load_vit_module()
    if arch not in vit.SPECS:
        raise UserError(f"unknown architecture {arch!r} (known: {', '.join(vit.SPECS)})")
    if weights and not Path(weights).is_file():
        raise UserError(f"--weights: no such file {weights!r}")
    model = vit.build_vit(arch, weights=weights)
    target = out_repository / (model_name or arch) / "1" / "model.onnx"
    target.parent.mkdir(parents=True, exist_ok=True)
    example = torch.zeros(1, 3, 224, 224)
    torch.onnx.export(
        model,
        (example,),
        str(target),
        input_names=["image"],
        output_names=["embedding"],
        dynamic_axes={"image": {0: "batch"}, "embedding": {0: "batch"}},
        opset_version=opset,
        # The TorchScript exporter, not torch's dynamo one, which bakes the batch size into the
        # attention's reshape: Triton's dynamic batcher needs a model that takes any batch
        # (docs/results/design_notes.md). It also needs no onnxscript.
        dynamo=False,
    )
    return target
