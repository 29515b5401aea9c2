"""A decoupled model's recording made before the sweep left its server split out (its levels
carry queue, compute and "outside server" figures): the report and the replay say "not measured"
all the same (issue 54, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.analysis.stream_split import DECOUPLED_SPLIT
from engine.events import ServerReady
from engine.record.exporters import export
from engine.record.reader import Recording
from engine.record.summary import summarize
from tests.cli_runner import run_cli
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.structs import replace


def _decoupled_recording(tmp_path: Path) -> Path:
    events = synthetic_session(SyntheticRun(levels=[1, 4], windows_per_level=1, gpu_count=1, variant="1x",
                                            probe=False, transport="grpc_stream"))
    decoupled = {"model_transaction_policy": {"decoupled": True}}
    events = [replace(e, model_config={**e.model_config, **decoupled}) if isinstance(e, ServerReady)
              else e for e in events]
    return record_events(tmp_path / "stream.sqlite", events)


@pytest.mark.slow  # writes a synthetic recording, exports and replays it through the CLI
def test_an_older_decoupled_recording_reads_not_measured(tmp_path: Path) -> None:
    path = _decoupled_recording(tmp_path)
    with Recording.open(path) as rec:
        recorded = [e.server for e in rec.events(("level_result",))]
        summary = summarize(rec)
        report = Path(export(rec, "md", tmp_path)).read_text()
    assert recorded and all(s is not None and s.client_minus_server is not None for s in recorded)  # as recorded
    servers = [level.result.server for level in summary.levels]
    assert servers and all(s is not None and s.no_split == DECOUPLED_SPLIT and s.server_total is None
                           for s in servers)
    assert f"{DECOUPLED_SPLIT}: " in report and "Outside server ms" not in report
    proc = run_cli("replay", "--headless", str(path), timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("level ")]
    assert rows and all("not measured" in row for row in rows), proc.stdout[-2000:]
