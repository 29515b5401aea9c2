"""Triton's trace read into the front end's span per request, and the grpc_h2 table built from it."""

from bench.grpc_h2 import trace_summary
from bench.triton_trace import split


def _trace(tid: int, t0: int, stamps: dict[str, int]) -> list[dict]:
    # as Triton writes it: the model line, then one entry per stamp, in no fixed order
    return [{"id": tid, "model_name": "m", "model_version": 1},
            *({"id": tid, "timestamps": [{"name": name, "ns": t0 + at * 1_000_000}]} for name, at in stamps.items())]


FULL = {"GRPC_WAITREAD_START": -50, "GRPC_WAITREAD_END": 0, "REQUEST_START": 1, "QUEUE_START": 1, "COMPUTE_START": 3,
        "COMPUTE_END": 7, "REQUEST_END": 8, "GRPC_SEND_START": 7, "GRPC_SEND_END": 9}


def test_the_span_runs_from_the_request_read_whole_to_its_response_handed_over() -> None:
    entries = _trace(1, 10**12, FULL) + _trace(2, 2 * 10**12, {**FULL, "GRPC_SEND_END": 11})
    got = split(entries)
    assert got == {"requests": 2.0, "front_end_ms": 10.0, "in_ms": 1.0, "queue_ms": 2.0, "compute_ms": 4.0,
                   "out_ms": 3.0}


def test_a_request_missing_a_stamp_is_left_out_and_none_means_none_had_them() -> None:
    partial = {k: v for k, v in FULL.items() if k != "GRPC_SEND_END"}
    assert split(_trace(1, 0, FULL) + _trace(2, 0, partial))["requests"] == 1.0
    assert split(_trace(2, 0, partial)) is None


def test_the_table_puts_the_rest_of_the_clients_latency_on_its_side() -> None:
    trace = {"requests": 10.0, "front_end_ms": 20.0, "in_ms": 0.5, "queue_ms": 8.0, "compute_ms": 10.0, "out_ms": 1.5}
    rows = [{"level": 256, "round": r, "tool": t, "ok": True, "mean_ms": m, "trace": trace}
            for r in (0, 1) for t, m in (("grpc", 30.0), ("pa", 38.0))]
    rows.append({"level": 256, "round": 2, "tool": "pa", "ok": False, "mean_ms": None, "trace": None})
    lines = trace_summary(rows, [256], ["grpc", "pa"])
    ours, theirs = lines[2], lines[3]
    assert ours.startswith("| 256 | ours grpc") and ours.endswith("| 2 | 30.00 | 20.00 | 0.50 / 8.00 / 10.00 / 1.50 | 10.00 |")
    assert theirs.endswith("| 2 | 38.00 | 20.00 | 0.50 / 8.00 / 10.00 / 1.50 | 18.00 |")
