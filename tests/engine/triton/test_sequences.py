"""Sequence models without a server: the config read, the streams format's one-line errors, the
requests' slots, and how each connection walks its sequences (ids, lengths, a failed step)."""

from __future__ import annotations

import json

import pytest

from engine.errors import UserError
from engine.net.connection import RequestCycle
from engine.profiles import Load
from engine.triton.input_json import parse_document
from engine.triton.input_tensors import DataModel
from engine.triton.sequences import (
    PARAMETERS,
    SequenceSetup,
    batcher_line,
    sequence_config,
    slot_offsets,
)
from engine.triton.target import TargetInfo
from engine.triton.transports.sequence_steps import (
    RANK_SHIFT,
    SequenceCursor,
    SequencePlan,
    Sequences,
)

CONFIG = {
    "sequence_batching": {
        "max_sequence_idle_microseconds": 5000000,
        "oldest": {"max_candidate_sequences": 4},
        "control_input": [
            {"name": "S", "control": [{"kind": "CONTROL_SEQUENCE_START"}]},
            {"name": "E", "control": [{"kind": "CONTROL_SEQUENCE_END"}]},
            {"name": "ID", "control": [{"kind": "CONTROL_SEQUENCE_CORRID", "data_type": "TYPE_UINT64"}]},
        ],
    },
}
INFO = TargetInfo(inputs=[{"name": "INPUT", "datatype": "INT32", "shape": [-1, 1]}],
                  outputs=[{"name": "OUTPUT", "datatype": "INT32", "shape": [-1, 1]}], max_batch_size=16,
                  model_config=CONFIG)


def test_the_config_gives_the_strategy_controls_and_limits() -> None:
    config = sequence_config(CONFIG)
    assert config is not None
    assert config.strategy == "oldest" and config.max_candidates == 4 and config.idle_us == 5000000
    assert config.controls == {"CONTROL_SEQUENCE_START": "S", "CONTROL_SEQUENCE_END": "E",
                               "CONTROL_SEQUENCE_CORRID": "ID"}
    assert sequence_config({"dynamic_batching": {}}) is None


def _parse(doc: dict) -> tuple[list, list[int]]:
    streams: list[int] = []
    return parse_document(doc, DataModel(INFO, {}), "x", [], streams), streams


def test_streams_become_steps_in_order_with_their_lengths() -> None:
    entries, streams = _parse({"data": [[{"INPUT": [1]}, {"INPUT": [2]}], [{"INPUT": [3]}]],
                               "validation_data": [[{"OUTPUT": [1]}, {"OUTPUT": [3]}], [{"OUTPUT": [3]}]]})
    assert streams == [2, 1]
    assert [e.inputs["INPUT"].raw for e in entries] == [(v).to_bytes(4, "little") for v in (1, 2, 3)]
    assert entries[1].expected["OUTPUT"].raw == (3).to_bytes(4, "little")


@pytest.mark.parametrize(("doc", "needle"), [
    ({"data": [[{"INPUT": [1]}], {"INPUT": [1]}]}, "x: entry 1 is not a list of steps, though entry 0 is"),
    ({"data": [[{"INPUT": [1]}], []]}, "x: entry 1 is an empty stream"),
    ({"data": [[{"INPUT": [1]}, {"INPUT": [2.5]}]]}, "x: data entry 0, step 1, input 'INPUT'"),
    ({"data": [[{"INPUT": [1]}, {"OTHER": [1]}]]}, "x: entry 0, step 1 lacks input 'INPUT'"),
    ({"data": [[{"INPUT": [1]}, 7]]}, "x: data entry 0, step 1 is not an object"),
    ({"data": [[{"INPUT": [1]}, {"INPUT": [1]}]], "validation_data": [[{"OUTPUT": [1]}]]},
     "x: validation_data entry 0 must align with its stream (2 steps), found 1 steps"),
    ({"data": [[{"INPUT": [1], "E": [1]}]]}, "x: entry 0, step 0 gives 'E', the sequence batcher's CONTROL_SEQUENCE_END"),
])
def test_a_malformed_stream_is_one_line_naming_the_entry_and_step(doc: dict, needle: str) -> None:
    with pytest.raises(UserError) as caught:
        _parse(json.loads(json.dumps(doc)))
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def _request(body: bytes = b'"inputs":[]}') -> bytes:
    return b"POST /v2/models/m/infer HTTP/1.1\r\n\r\n" + PARAMETERS + body


def test_the_slots_are_found_and_filled_in_place() -> None:
    raw = _request()
    plan = SequenceSetup(sequence_config(CONFIG), (), 3, 0, rank=2).plan((raw,))  # type: ignore[arg-type]
    assert plan.slots == (slot_offsets(raw),) and plan.id_base == 2 << RANK_SHIFT
    cursor = SequenceCursor(Sequences(plan, 5, RequestCycle(1, 5)))
    cursor.advance()
    head = cursor.head(raw, plan.slots[0])
    sent = json.loads(bytes(head + raw[len(head):]).split(b"\r\n\r\n", 1)[1])
    assert sent["parameters"] == {"sequence_id": (2 << RANK_SHIFT) + (5 << 32) + 1, "sequence_start": True,
                                  "sequence_end": False}


def _walk(cursor: SequenceCursor, sends: int, fail_at: int = -1) -> list[tuple[int, int, bool]]:
    seen = []
    for k in range(sends):
        cursor.advance()
        seen.append((cursor.id, cursor.step, cursor.last))
        if k != fail_at:
            cursor.answered += 1
    return seen


def test_each_connection_walks_whole_sequences_with_ids_of_its_own() -> None:
    plan = SequencePlan(slots=((0, 0, 0),), length=3, variation=0)
    sequences = Sequences(plan, 1, RequestCycle(1, 1))
    a, b = SequenceCursor(sequences), SequenceCursor(sequences)
    first = _walk(a, 6)
    assert [(s, last) for _, s, last in first] == [(0, False), (1, False), (2, True)] * 2
    ids = {i for i, _, _ in first} | {i for i, _, _ in _walk(b, 3)}
    assert len(ids) == 3  # two sequences on one connection, one on the other: none shared
    other_worker = Sequences(plan, 2, RequestCycle(1, 2))
    assert not ids & {i for i, _, _ in _walk(SequenceCursor(other_worker), 6)}


def test_a_failed_step_starts_its_sequence_again_under_its_id() -> None:
    plan = SequencePlan(slots=((0, 0, 0),), length=5, variation=0)
    cursor = SequenceCursor(Sequences(plan, 0, RequestCycle(1, 0)))
    seen = _walk(cursor, 4, fail_at=1)
    assert [s for _, s, _ in seen] == [0, 1, 0, 1]  # step 1 failed: its sequence starts again (START)
    assert seen[2][0] == seen[0][0]  # under its id: Triton's slot for it is taken back at once


def test_the_next_level_restarts_the_sequences_a_level_left_unfinished() -> None:
    plan = SequencePlan(slots=((0, 0, 0),), length=3, variation=0)
    sequences = Sequences(plan, 0, RequestCycle(1, 0))
    mid, done = SequenceCursor(sequences), SequenceCursor(sequences)
    left = _walk(mid, 2)[-1][0]  # two steps of three
    _walk(done, 3)  # a whole sequence
    sequences.reclaim()  # the level ended
    again = SequenceCursor(sequences)
    again.advance()
    assert (again.id, again.step) == (left, 0)  # START on the unfinished id
    fresh = SequenceCursor(sequences)
    fresh.advance()
    assert fresh.id not in (left, done.id)


def test_streams_give_their_steps_in_order() -> None:
    plan = SequencePlan(slots=((0, 0, 0),) * 5, streams=((0, 2), (2, 3)))
    sequences = Sequences(plan, 0, RequestCycle(2, 0))
    cursor = SequenceCursor(sequences)
    sent = []
    for _ in range(5):
        cursor.advance()
        sent.append((cursor.request(), cursor.step == 0, cursor.last))
        cursor.answered += 1
    assert sent == [(0, True, False), (1, False, True), (2, True, False), (3, False, False), (4, False, True)]


def test_the_profile_keys_default_as_perf_analyzer() -> None:
    load = Load()
    assert load.sequence_length == 20 and load.sequence_length_variation == 20.0


def test_a_grpc_steps_parameters_parse_as_protobuf_with_the_ids_value() -> None:
    from engine.triton.transports.grpc_common import GRPC_PREFIX, messages
    from engine.triton.transports.sequence_steps import PROTO_PARAMETERS

    pb = messages()
    body = PROTO_PARAMETERS + pb.ModelInferRequest(model_name="m").SerializeToString()
    framed = b"\x00" + len(body).to_bytes(4, "big") + body
    plan = SequenceSetup(sequence_config(CONFIG), (), 2, 0, rank=3).plan((body,), proto_at=GRPC_PREFIX)  # type: ignore[arg-type]
    cursor = SequenceCursor(Sequences(plan, 7, RequestCycle(1, 7)))
    for step in range(2):
        cursor.advance()
        head = cursor.head(framed, plan.slots[0])
        sent = pb.ModelInferRequest.FromString((bytes(head) + framed[len(head):])[GRPC_PREFIX:])
        assert sent.model_name == "m"
        assert sent.parameters["sequence_id"].int64_param == (3 << RANK_SHIFT) + (7 << 32) + 1
        assert sent.parameters["sequence_start"].bool_param is (step == 0)
        assert sent.parameters["sequence_end"].bool_param is (step == 1)
        cursor.answered += 1


def test_the_reports_line_states_the_batchers_settings() -> None:
    config = sequence_config(CONFIG)
    assert config is not None
    line = batcher_line(config)
    assert "oldest strategy" in line and "max_sequence_idle_microseconds 5000000 µs" in line
    assert "max_candidate_sequences 4" in line and "S (START), E (END), ID (CORRID)" in line
    unset = sequence_config({"sequence_batching": {"direct": {}}})
    assert unset is not None and "not set (Triton's default, 1 s)" in batcher_line(unset)
    # Triton's statistics hold no count of the sequences it held: said so, never a 0
    for shown in (line, batcher_line(unset)):
        assert shown.endswith("Sequences Triton held: not reported by this server (its statistics and /metrics "
                              "have no sequence batcher figure).")
        assert "Queue ms is Triton's mean queue time per request" in shown
    assert "slots" not in batcher_line(unset)  # no instance_group: the slots are not known


def test_the_direct_strategys_slots_are_max_batch_size_per_instance() -> None:
    config = sequence_config({"max_batch_size": 8, "sequence_batching": {"direct": {}},
                              "instance_group": [{"count": 2, "gpus": [0, 1]}, {"count": 1, "gpus": []}]})
    assert config is not None and config.slots == 8 * 5
    assert "; 40 sequence slots (max_batch_size 8 x 5 instances)" in batcher_line(config)
    assert "wait for a free sequence slot while all are held" in batcher_line(config)
    oldest = sequence_config({"max_batch_size": 8, "sequence_batching": {"oldest": {"max_candidate_sequences": 3}},
                              "instance_group": [{"count": 1}]})
    assert oldest is not None and oldest.slots is None
    assert "a place among the candidate sequences" in batcher_line(oldest)


def test_a_string_correlation_id_is_refused_in_one_line() -> None:
    from engine.triton.sequences import check_sequence_load

    config = sequence_config({"sequence_batching": {"control_input": [
        {"name": "CORRID", "control": [{"kind": "CONTROL_SEQUENCE_CORRID", "data_type": "TYPE_STRING"}]}]}})
    assert config is not None and config.corrid_type == "TYPE_STRING"
    with pytest.raises(UserError) as caught:
        check_sequence_load(Load(), "m", config, False)
    assert str(caught.value) == ("model 'm': control input 'CORRID' (CONTROL_SEQUENCE_CORRID) takes string sequence "
                                 "ids; the tool sends integer ids only")
