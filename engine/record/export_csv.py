"""perf_analyzer's CSV (``-f file.csv --verbose-csv``, plus ``--collect-metrics``' four GPU
columns when the recording has GPU telemetry): one row per level, sorted by load, times in
integer microseconds, so that spreadsheets and scripts built for perf_analyzer read ours.

Columns we cannot fill are left empty, never estimated: ``Client Send``, ``Client Recv`` and
``request/response`` (perf_analyzer times its own request serialisation and response parsing;
our load workers do not time those apart from the round trip), and ``response wait`` (the round
trip minus those). ``Network+Server Send/Recv`` is, as in perf_analyzer, the mean latency minus
the server's queue and compute times (floored at 0); here it also holds the client's send and
receive time, which perf_analyzer subtracts separately. Failed levels have no row (perf_analyzer
writes none for a level it could not measure); unstable levels do, as measured.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping

from engine.modes import CONCURRENCY, RATE, mode_of
from engine.record.gpu_fields import FIELDS
from engine.record.safe_text import csv_cell
from engine.record.summary import LevelSummary, RecordingSummary

HEADER_CONCURRENCY = CONCURRENCY.csv_header
HEADER_RATE = RATE.csv_header
COLUMNS = [
    "Inferences/Second", "Client Send", "Network+Server Send/Recv", "Server Queue", "Server Compute Input",
    "Server Compute Infer", "Server Compute Output", "Client Recv", "p50 latency", "p90 latency",
    "p95 latency", "p99 latency", "Avg latency", "request/response", "response wait",
]
# a streaming model's columns (after the GPU ones; times in usec as perf_analyzer's latencies)
STREAM_COLUMNS = [
    "Time To First Token p50", "Time To First Token p99", "Inter Token Latency p50", "Inter Token Latency p99",
    "Output Token Throughput (per sec)", "Output Tokens/Request", "Responses/Request",
    # the prompts' tokens as the server counted them (OpenAI's usage; empty: not measured), and what
    # the token figures count: "tokens", or "words" where the server reported no usage
    "Input Tokens/Request", "Input Token Throughput (per sec)", "Token Unit",
]
GPU_FIELDS = [f for f in FIELDS if f.csv_header is not None]
GPU_COLUMNS = [f.csv_header for f in GPU_FIELDS]


def _us(seconds: float | None) -> str:
    return "" if seconds is None else str(int(round(seconds * 1e6)))


def _per_gpu(values: Mapping[str, float], scale: float = 1.0, integer: bool = False) -> str:
    """perf_analyzer's per-GPU cell: "<gpu uuid>:<value>;" for each GPU."""
    parts = []
    for uuid, value in sorted(values.items()):
        v = value * scale
        parts.append(f"{uuid}:{int(round(v)) if integer else round(v, 6)};")
    return "".join(parts)


def _row(lv: LevelSummary, with_gpu: bool) -> list[str]:
    r = lv.result
    s = r.server
    lat = r.latency
    network = None
    if s is not None and lat.mean is not None and None not in (s.queue, s.compute_input, s.compute_infer, s.compute_output):
        network = max(lat.mean - s.queue - s.compute_input - s.compute_infer - s.compute_output, 0.0)  # type: ignore[operator]  # all set together with the server stats
    row = [
        f"{r.level:g}", f"{r.throughput_ips:.2f}", "", _us(network),
        _us(s.queue if s else None), _us(s.compute_input if s else None), _us(s.compute_infer if s else None),
        _us(s.compute_output if s else None), "", _us(lat.p50), _us(lat.p90), _us(lat.p95), _us(lat.p99),
        _us(lat.mean), "", "",
    ]
    if with_gpu:
        row += [_per_gpu(lv.gpu.get(f.column, {}), f.csv_scale, f.csv_integer) for f in GPU_FIELDS]
    return row


def _stream_cells(lv: LevelSummary) -> list[str]:
    st = lv.result.stream
    if st is None:
        return [""] * len(STREAM_COLUMNS)
    tokens = st.tokens_per_request if st.tokens_per_request is not None else st.responses_per_request
    return [_us(st.ttft.p50), _us(st.ttft.p99), _us(st.itl.p50), _us(st.itl.p99), f"{st.output_tokens_per_s:.2f}",
            f"{tokens:.2f}", f"{st.responses_per_request:.2f}",
            f"{st.input_tokens_per_request:.2f}" if st.input_tokens_per_request is not None else "",
            f"{st.input_tokens_per_s:.2f}" if st.input_tokens_per_s is not None else "",
            "words" if st.tokens_are_words else "tokens"]


def levels_csv(summary: RecordingSummary) -> str:
    """With several sweeps in the session, a last ``Sweep`` column says which each row is from
    (rows by sweep, then load): a reader keyed on perf_analyzer's headers still finds them."""
    levels: Iterable[LevelSummary] = [
        lv for lv in summary.levels if lv.result.status != "failed" and lv.result.requests > 0
    ]
    levels = sorted(levels, key=lambda lv: (lv.sweep, lv.result.level))
    several = len({lv.sweep for lv in levels}) > 1
    with_gpu = any(lv.gpu_util for lv in levels)
    open_loop = mode_of(summary.load_mode).open_loop or any(mode_of(lv.result.mode).open_loop for lv in levels)
    first = HEADER_RATE if open_loop else HEADER_CONCURRENCY
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    streaming = any(lv.result.stream is not None for lv in levels)
    writer.writerow([first, *COLUMNS, *(GPU_COLUMNS if with_gpu else []), *(STREAM_COLUMNS if streaming else []),
                     *(["Sweep"] if several else [])])
    for lv in levels:  # cells from outside (a remote GPU's UUID) never start a formula
        cells = _row(lv, with_gpu) + (_stream_cells(lv) if streaming else []) + ([str(lv.sweep)] if several else [])
        writer.writerow([csv_cell(c) for c in cells])
    return out.getvalue()
