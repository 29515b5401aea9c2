from __future__ import annotations

from pathlib import Path

import pytest

from engine.record.recorder import Recorder
from tests.tui.synthetic import session_events


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    """A real recording (the engine's recorder) of the synthetic session."""
    path = tmp_path / "cpu_0gpu_test_20240101T000000Z.sqlite"
    recorder = Recorder(path)
    for event in session_events():
        recorder(event)
    recorder.close()
    return path
