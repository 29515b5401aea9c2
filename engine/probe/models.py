"""The models the probe trains: seed 002's two MLPs, a transformer stack, or the user's own.

Seed 002 gives hidden layers and parameter counts but not the input and output sizes; these
are the sizes that make nn.Linear (with biases) land on its counts exactly:

* ``mlp_258k``: 799 features -> 256-128-64 -> 192 classes   = 258,432 parameters
* ``mlp_6.9m``: 4608 features -> 1024-1024-512-512-256 -> 768 classes = 6,885,376 parameters

``transformer`` is the larger model: 12 pre-norm encoder blocks, d_model 768, 12 heads,
FFN 3072 (BERT-base's block shapes without the embedding), 128 tokens per sample, mean-pooled
into a 1000-class head: 85.8 M parameters, more than ResNet-50's 25.6 M. ``transformer_tiny``
is the same code at toy size, for tests on CPU.

A user's model is ``package.module:factory``. The factory takes no arguments and returns a
ProbeModel, or an nn.Module with a ``probe_batch(batch_size) -> (inputs, targets)`` method
(and optionally ``probe_loss(outputs, targets)``; default cross-entropy for integer targets,
MSE otherwise; optionally ``probe_shard_units`` for FSDP).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from engine.errors import UserError

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass
class ProbeModel:
    module: nn.Module
    make_batch: Callable[[int, torch.device], Batch]  # synthetic data, created on the device
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    shard_units: list[nn.Module] = field(default_factory=list)  # FSDP: fully_shard each, then root


def count_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# --------------------------------------------------------------------------- MLPs (seed 002)


def mlp(in_features: int, hidden: list[int], out_features: int, dropout: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = in_features
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]
        width = h
    layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)


def _classifier(module: nn.Module, in_shape: tuple[int, ...], classes: int, units: list[nn.Module]) -> ProbeModel:
    def make_batch(batch_size: int, device: torch.device) -> Batch:
        x = torch.randn(batch_size, *in_shape, device=device)
        y = torch.randint(0, classes, (batch_size,), device=device)
        return x, y

    return ProbeModel(module, make_batch, nn.functional.cross_entropy, units)


def _mlp_model(in_features: int, hidden: list[int], out_features: int, dropout: float) -> ProbeModel:
    net = mlp(in_features, hidden, out_features, dropout)
    return _classifier(net, (in_features,), out_features, [m for m in net if isinstance(m, nn.Linear)])


def mlp_258k() -> ProbeModel:
    return _mlp_model(799, [256, 128, 64], 192, 0.2)


def mlp_6_9m() -> ProbeModel:
    return _mlp_model(4608, [1024, 1024, 512, 512, 256], 768, 0.3)


# --------------------------------------------------------------------------- transformer


class TransformerStack(nn.Module):
    """Pre-norm encoder blocks over float token features, mean-pooled into a classifier."""

    def __init__(self, d_model: int, heads: int, ffn: int, layers: int, classes: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, heads, ffn, dropout=0.1, batch_first=True, norm_first=True)
            for _ in range(layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(dim=1))


def _transformer(d_model: int, heads: int, ffn: int, layers: int, tokens: int, classes: int) -> ProbeModel:
    net = TransformerStack(d_model, heads, ffn, layers, classes)
    return _classifier(net, (tokens, d_model), classes, list(net.blocks))


def transformer() -> ProbeModel:
    return _transformer(768, 12, 3072, 12, 128, 1000)


def transformer_tiny() -> ProbeModel:
    return _transformer(32, 2, 64, 2, 8, 10)


BUILTIN: dict[str, Callable[[], ProbeModel]] = {
    "mlp_258k": mlp_258k,
    "mlp_6.9m": mlp_6_9m,
    "transformer": transformer,
    "transformer_tiny": transformer_tiny,
}


# --------------------------------------------------------------------------- user models


def _default_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    if targets.dtype in (torch.int64, torch.int32):
        return nn.functional.cross_entropy(outputs, targets)
    return nn.functional.mse_loss(outputs.float(), targets.float())


def _from_module(module: nn.Module, name: str) -> ProbeModel:
    probe_batch = getattr(module, "probe_batch", None)
    if not callable(probe_batch):
        raise UserError(
            f"model {name!r}: the factory must return a ProbeModel or an nn.Module with a "
            "probe_batch(batch_size) -> (inputs, targets) method"
        )

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        x, y = probe_batch(batch_size)
        return x.to(device), y.to(device)

    loss = getattr(module, "probe_loss", None)
    units = list(getattr(module, "probe_shard_units", []) or [])
    return ProbeModel(module, make_batch, loss if callable(loss) else _default_loss, units)


def build_model(name: str) -> ProbeModel:
    """A built-in model by name, or a user's ``module:factory``."""
    if name in BUILTIN:
        return BUILTIN[name]()
    factory = load_factory(name)
    made = factory()
    if isinstance(made, ProbeModel):
        return made
    if isinstance(made, nn.Module):
        return _from_module(made, name)
    raise UserError(f"model {name!r}: the factory returned {type(made).__name__}, not an nn.Module or ProbeModel")


def load_factory(name: str) -> Callable[[], object]:
    module_name, sep, attr = name.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"unknown model {name!r} (built-in: {', '.join(BUILTIN)}; or give module:factory)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"model {name!r}: cannot import {module_name!r}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise UserError(f"model {name!r}: {module_name} has no callable {attr!r}")
    return factory
