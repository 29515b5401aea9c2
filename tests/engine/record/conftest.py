"""Shared helpers: recordings written through the real Recorder from synthetic sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.record.synthetic_recordings import SyntheticRun, make_recording


@pytest.fixture(scope="session")
def recording_4x(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4x RTX 4080 at 150 images/s per GPU, 1-minute-ish synthetic session (read-only use)."""
    return make_recording(tmp_path_factory.mktemp("rec4x"), "rtx4080_4gpu.sqlite",
                          SyntheticRun(capacity_per_gpu_ips=150.0))
