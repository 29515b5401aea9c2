"""compare reports only differences there are: 10 and 10.0 are one setting, the client's torch
says nothing of a remote server, and the "same inputs" line does not contradict a note that the
input data differs."""

from __future__ import annotations

from pathlib import Path

from engine import events as ev
from engine.record.compare import compare, render_compare
from engine.record.reader import Recording
from tests.engine.record.synthetic_recordings import SyntheticRun, record_events, synthetic_session
from tests.structs import replace


def _recording(folder: Path, name: str, *, stability: float, torch: str, embedded: bool) -> Recording:
    events = []
    for event in synthetic_session(SyntheticRun(probe=False, levels=[1, 4])):
        if isinstance(event, ev.SessionStarted):
            profile = {**event.profile, "load": {**event.profile["load"], "stability_percent": stability}}
            event = replace(event, profile=profile, versions={**event.versions, "torch": torch})
        elif isinstance(event, ev.ServerReady):
            event = replace(event, embedded=embedded)
        events.append(event)
    return Recording.open(record_events(folder / name, events))


def test_ten_and_ten_point_oh_are_the_same_setting(tmp_path):
    a = _recording(tmp_path, "a.sqlite", stability=10, torch="2.6.0", embedded=True)
    b = _recording(tmp_path, "b.sqlite", stability=10.0, torch="2.6.0", embedded=True)
    assert not any("stability_percent" in n for n in compare([a, b]).notes)
    c = _recording(tmp_path, "c.sqlite", stability=12.5, torch="2.6.0", embedded=True)
    assert any("load.stability_percent differs: 10 " in n for n in compare([a, c]).notes)


def test_the_clients_torch_is_not_a_difference_of_remote_runs(tmp_path):
    a = _recording(tmp_path, "a.sqlite", stability=10, torch="2.6.0", embedded=False)
    b = _recording(tmp_path, "b.sqlite", stability=10, torch="2.7.1", embedded=False)
    assert not any("torch" in n for n in compare([a, b]).notes)
    # an embedded server runs its model under our torch: there it is the server's
    c = _recording(tmp_path, "c.sqlite", stability=10, torch="2.6.0", embedded=True)
    d = _recording(tmp_path, "d.sqlite", stability=10, torch="2.7.1", embedded=True)
    assert any(n.startswith("torch version differs") for n in compare([c, d]).notes)


def test_same_inputs_line_says_when_the_data_sent_differs():
    from engine.record import compare as module

    comparison = module.Comparison(runs=[], notes=["input data differs: a (run1); b (run2): ..."])
    text = render_compare(comparison, "md")
    assert "model inputs (names, types, shapes)" in text and "the input data sent differs (below)" in text
