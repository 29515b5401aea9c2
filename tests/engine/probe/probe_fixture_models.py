"""User models for the probe's tests, named as tests.engine.probe.probe_fixture_models:<factory>."""

import os
import time

import torch
from torch import nn


class _Regressor(nn.Module):
    """A user model the plain way: an nn.Module with probe_batch (float targets -> MSE)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def probe_batch(self, batch_size: int):
        return torch.randn(batch_size, 8), torch.randn(batch_size, 2)


class _Faulty(_Regressor):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == "hang_everywhere" or os.environ.get("RANK") == "1":
            if self.mode == "crash":
                raise RuntimeError("injected failure on rank 1")
            time.sleep(3600)  # a hung rank: the launcher's timeout (or stop) must end it
        return super().forward(x)


def regressor() -> nn.Module:
    return _Regressor()


def crash_on_rank1() -> nn.Module:
    return _Faulty("crash")


def hang_on_rank1() -> nn.Module:
    return _Faulty("hang")


def hang_everywhere() -> nn.Module:
    return _Faulty("hang_everywhere")


def not_a_model() -> object:
    return 42
