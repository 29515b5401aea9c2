"""Shared helpers: recordings written through the real Recorder from synthetic sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session


def make_recording(directory: Path, name: str = "run.sqlite", run: SyntheticRun | None = None) -> Path:
    return record_events(directory / name, synthetic_session(run))


@pytest.fixture(scope="session")
def recording_4x(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4x RTX 4080 at 150 images/s per GPU, 1-minute-ish synthetic session (read-only use)."""
    return make_recording(tmp_path_factory.mktemp("rec4x"), "rtx4080_4gpu.sqlite",
                          SyntheticRun(capacity_per_gpu_ips=150.0))
