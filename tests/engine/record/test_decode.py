"""The one event decoder (engine.events.event_from_dict), as recordings, replay and exports use it."""

import json

import pytest

from engine.events import (
    SCHEMA_VERSION,
    Error,
    EventSchemaError,
    GpuReading,
    GpuSample,
    NotJson,
    ReplayReset,
    ServerStopped,
    UnknownEventKind,
    Warning,
    event_from_dict,
    event_from_json,
    event_kinds,
)
from tests.engine.record.synthetic_recordings import SyntheticRun, synthetic_session

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


def test_every_kind_round_trips_through_json() -> None:
    events = _samples()
    assert {e.kind for e in events} >= KINDS_AT_WRITING  # every kind of the contract as written is exercised
    for event in events:
        assert event_from_dict(json.loads(json.dumps(event.to_dict()))) == event


def test_errors_are_typed() -> None:
    with pytest.raises(UnknownEventKind) as unknown:
        event_from_dict({"kind": "no_such_kind", "v": SCHEMA_VERSION})
    assert unknown.value.event_kind == "no_such_kind"
    for bad in ({"kind": "warning", "v": SCHEMA_VERSION + 1, "source": "s", "message": "m"},  # newer version
                {"kind": "warning", "v": SCHEMA_VERSION},  # required fields missing
                {"kind": "warning", "v": SCHEMA_VERSION, "source": 3, "message": "m"},  # wrong type
                {"kind": "session_ended", "v": SCHEMA_VERSION, "status": None}):  # None where none is allowed
        with pytest.raises(EventSchemaError) as exc:
            event_from_dict(bad)
        assert not isinstance(exc.value, UnknownEventKind), bad  # a reader must not skip these as "newer kinds"
        assert "\n" not in str(exc.value)


def test_unknown_fields_are_ignored() -> None:
    data = Warning(source="s", message="m").to_dict() | {"added_in_a_newer_minor": 1}
    assert event_from_dict(data) == Warning(source="s", message="m", ts=data["ts"])


def test_a_status_is_one_of_its_words() -> None:
    """Statuses are Literal types: a word the contract lacks is a malformed event, named in one line."""
    with pytest.raises(EventSchemaError, match=r"status: expected one of 'ok', 'failed', 'interrupted', found 'done'"):
        event_from_dict({"kind": "session_ended", "v": SCHEMA_VERSION, "status": "done"})
    assert event_from_dict({"kind": "session_ended", "v": SCHEMA_VERSION, "status": "interrupted"}).status == "interrupted"


def test_numbers_past_any_measurement_are_refused_where_numbers_are_declared() -> None:
    with pytest.raises(EventSchemaError, match=r"per_core.1: expected a number, found 1e\+200"):
        event_from_dict({"kind": "host_sample", "v": SCHEMA_VERSION, "cpu_percent": 1.0, "per_core": [1.0, 1e200]})
    sample = event_from_dict({"kind": "host_sample", "v": SCHEMA_VERSION, "cpu_percent": float("inf"),
                              "per_core": [1.0, float("nan")]})
    assert sample.cpu_percent is None and sample.per_core == [1.0, None]  # not available, as recorded
    # a table of any values (the recorded profile) is used as it is
    started = event_from_dict({"kind": "session_started", "v": SCHEMA_VERSION, "session_id": "s", "profile_name": "p",
                               "profile": {"load": {"warmup_s": 1e308}}, "mode": "sweep"})
    assert started.profile == {"load": {"warmup_s": 1e308}}


def test_an_int_field_holding_a_whole_float_reads_as_the_int() -> None:
    event = event_from_dict({"kind": "server_stopped", "v": SCHEMA_VERSION, "exit_code": 3.0})
    assert event.exit_code == 3 and isinstance(event.exit_code, int)
    with pytest.raises(EventSchemaError, match="exit_code: expected a number, found 3.5"):
        event_from_dict({"kind": "server_stopped", "v": SCHEMA_VERSION, "exit_code": 3.5})


AGREEING_CASES = [
    {"kind": "warning", "v": SCHEMA_VERSION, "source": "s", "message": "m", "ts": 1.5},
    {"kind": "no_such_kind", "v": SCHEMA_VERSION},
    {"kind": "warning", "v": SCHEMA_VERSION + 1, "source": "s", "message": "m"},
    {"kind": "warning", "v": SCHEMA_VERSION},
    {"kind": "warning", "v": SCHEMA_VERSION, "source": 3, "message": "m"},
    {"kind": "session_ended", "v": SCHEMA_VERSION, "status": "done"},
    {"kind": "host_sample", "v": SCHEMA_VERSION, "cpu_percent": 1.0, "per_core": [1.0, 1e200]},
    {"kind": "host_sample", "v": SCHEMA_VERSION, "cpu_percent": float("inf"), "per_core": [1.0, float("nan")], "ts": 2.0},
    {"kind": "server_stopped", "v": SCHEMA_VERSION, "exit_code": 3.0, "ts": 3.0},
    {"kind": "server_stopped", "v": SCHEMA_VERSION, "exit_code": 3.5},
    {"v": SCHEMA_VERSION, "reason": "no kind"},
]


def _outcome(read, data):  # noqa: ANN001, ANN202
    try:
        return read(data)
    except EventSchemaError as exc:
        return type(exc), str(exc)


@pytest.mark.parametrize("data", AGREEING_CASES, ids=lambda d: str(d.get("kind")))
def test_a_row_decoded_straight_from_its_json_reads_as_its_table_does(data: dict) -> None:
    """event_from_json (a recording's row, Python's json.dumps as recordings before msgspec were
    written, NaN included) gives the event or the one-line error event_from_dict gives."""
    from_json = _outcome(event_from_json, json.dumps(data))
    assert from_json == _outcome(event_from_dict, data)
    assert _outcome(event_from_json, json.dumps(data).encode()) == from_json  # bytes as text


def test_a_row_that_is_not_json_or_not_a_table_is_one_line() -> None:
    with pytest.raises(NotJson):
        event_from_json('{"kind": "warning", ')
    with pytest.raises(EventSchemaError, match="not an event: a JSON list, not a table"):
        event_from_json("[1, 2]")
