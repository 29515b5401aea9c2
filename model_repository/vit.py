"""The ViT image encoder the embedded server runs and `gpuscale-tui model export` writes.

Module names follow OpenCLIP's VisionTransformer (conv1, class_embedding, positional_embedding,
ln_pre, transformer.resblocks[i].{ln_1, attn, ln_2, mlp.c_fc, mlp.c_proj}, ln_post, proj), so a
real OpenCLIP checkpoint's ``visual.*`` weights load into it unchanged. Without weights the
architecture is the same with random values: throughput does not depend on weight values.

This file is copied next to each Python-backend model.py, so it imports only torch.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class VitSpec:
    image_size: int = 224
    patch_size: int = 32
    width: int = 768
    layers: int = 12
    heads: int = 12
    mlp_ratio: float = 4.0
    output_dim: int = 512


SPECS = {
    # OpenCLIP ViT-B-32 image tower: ~88M parameters
    "openclip_vit_b32": VitSpec(),
    # same family, small enough for a whole CPU sweep on 2 cores in minutes
    "vit_tiny": VitSpec(width=192, layers=4, heads=3),
}


class ResidualAttentionBlock(nn.Module):
    def __init__(self, width: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        hidden = int(width * mlp_ratio)
        self.mlp = nn.Sequential(
            OrderedDict([("c_fc", nn.Linear(width, hidden)), ("gelu", nn.GELU()), ("c_proj", nn.Linear(hidden, width))])
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.resblocks = nn.ModuleList(ResidualAttentionBlock(width, heads, mlp_ratio) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.resblocks:
            x = block(x)
        return x


class VisionTransformer(nn.Module):
    def __init__(self, spec: VitSpec) -> None:
        super().__init__()
        self.spec = spec
        scale = spec.width**-0.5
        grid = spec.image_size // spec.patch_size
        self.conv1 = nn.Conv2d(3, spec.width, kernel_size=spec.patch_size, stride=spec.patch_size, bias=False)
        self.class_embedding = nn.Parameter(scale * torch.randn(spec.width))
        self.positional_embedding = nn.Parameter(scale * torch.randn(grid * grid + 1, spec.width))
        self.ln_pre = nn.LayerNorm(spec.width)
        self.transformer = Transformer(spec.width, spec.layers, spec.heads, spec.mlp_ratio)
        self.ln_post = nn.LayerNorm(spec.width)
        self.proj = nn.Parameter(scale * torch.randn(spec.width, spec.output_dim))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.conv1(image).flatten(2).transpose(1, 2)  # [B, grid*grid, width]
        cls = self.class_embedding.to(x.dtype).expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], dim=1) + self.positional_embedding.to(x.dtype)
        x = self.transformer(self.ln_pre(x))
        return self.ln_post(x[:, 0, :]) @ self.proj


def load_openclip_visual(model: VisionTransformer, path: str) -> None:
    """Load the image tower from an OpenCLIP checkpoint (full model or visual-only state dict)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    visual = {k.split("visual.", 1)[1]: v for k, v in state.items() if "visual." in k} or state
    model.load_state_dict(visual, strict=True)


def build_vit(arch: str, weights: str | None = None, seed: int = 0) -> VisionTransformer:
    if arch not in SPECS:
        raise ValueError(f"unknown ViT architecture {arch!r} (known: {', '.join(SPECS)})")
    torch.manual_seed(seed)
    model = VisionTransformer(SPECS[arch])
    if weights:
        load_openclip_visual(model, weights)
    return model.eval()
