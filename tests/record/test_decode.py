import pytest

from engine.events import (
    SCHEMA_VERSION,
    Error,
    EventSchemaError,
    GpuReading,
    GpuSample,
    ReplayReset,
    ServerStopped,
    Warning,
    event_from_dict,
    event_kinds,
)
from engine.record.decode import decode_event
from engine.record.synthetic import SyntheticRun, synthetic_session

KINDS_AT_WRITING = {
    "session_started", "session_ended", "phase", "server_ready", "server_stopped", "level_started", "window",
    "level_result", "sweep_finished", "gpu_sample", "host_sample", "topology", "probe_result", "allreduce_result",
    "warning", "error", "replay_reset",
}


def test_kinds_at_writing_exist() -> None:
    assert KINDS_AT_WRITING <= set(event_kinds())


def _samples() -> list:
    events = synthetic_session(SyntheticRun(client_bound_from=64))
    events += [
        ServerStopped(reason="done", exit_code=0), Warning(source="s", message="m", key="k"),
        Error(source="s", message="m", fatal=True), ReplayReset(position_s=2.5),
        GpuSample(gpus=[GpuReading(uuid="GPU-1", index=None, source="triton", processes=[{"pid": 1, "name": "x"}])],
                  source="triton", interval_s=2.0),
    ]
    return events


def test_same_events_as_the_contract_decoder() -> None:
    events = _samples()
    assert {e.kind for e in events} >= KINDS_AT_WRITING  # every kind of the contract as written is exercised
    for event in events:
        data = event.to_dict()
        assert decode_event(data) == event_from_dict(data) == event


def test_same_errors_as_the_contract_decoder() -> None:
    for bad in ({"kind": "warning", "v": SCHEMA_VERSION + 1, "source": "s", "message": "m"},
                {"kind": "no_such_kind", "v": SCHEMA_VERSION},
                {"kind": "warning", "v": SCHEMA_VERSION}):  # required fields missing
        with pytest.raises(EventSchemaError):
            event_from_dict(bad)
        with pytest.raises(EventSchemaError):
            decode_event(bad)


def test_unknown_fields_are_ignored() -> None:
    data = Warning(source="s", message="m").to_dict() | {"added_in_a_newer_minor": 1}
    assert decode_event(data) == event_from_dict(data)
