"""The shared tables' columns, declared once: the sweep's levels, the training probe's results
and its bill, the all-reduce sweep and the wire check. Each column has its header (with the unit), the cell
it renders (through engine/format.py) and its layout hints; the TUI's tables, the headless
printer, the probe CLI and the reports (text, Markdown, HTML) all render these, so a figure
reads the same wherever it is shown. A renderer picks which columns it shows (a report has room
for p90, a terminal drops optional columns first), never how a column reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Generic, Literal, TypeVar

from engine import events as ev
from engine import format as fmt
from engine.analysis.training_bill import BillRow, Interval, TrainingBill

T = TypeVar("T")
Justify = Literal["left", "right"]


def _mean_of_known(values: list[float | None]) -> float | None:
    """The mean of the values a recording holds (None: not available), or None."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


WORDS_MARK = "w"  # a token figure that counts words: the server reported no usage (StreamStats.tokens_are_words)


def _words(f: LevelFigures, cell: str) -> str:
    """A token figure's cell, marked where its tokens are words, not the server's tokens."""
    return cell + WORDS_MARK if f.stream is not None and f.stream.tokens_are_words and cell[-1:].isdigit() else cell


def token_word(stream: ev.StreamStats | None, short: bool = False) -> str:
    """What a level's token figures count: the server's tokens, or words where it reported no usage."""
    if stream is not None and stream.tokens_are_words:
        return "words"
    return "tok" if short else "tokens"


@dataclass(frozen=True)
class Column(Generic[T]):
    key: str
    header: str  # the name and its unit: "p99 ms"
    cell: Callable[[T], str]
    width: int  # fixed width in plain text; a minimum on screen
    justify: Justify = "right"
    optional: bool = False  # dropped first where room is short
    short: str = ""  # the header without its unit, when even the required columns are too wide

    @property
    def short_header(self) -> str:
        return self.short or self.header


def cells(columns: Sequence[Column[T]], item: T) -> dict[str, str]:
    return {c.key: c.cell(item) for c in columns}


def headers(columns: Sequence[Column[T]]) -> list[str]:
    return [c.header for c in columns]


def row(columns: Sequence[Column[T]], item: T) -> list[str]:
    return [c.cell(item) for c in columns]


def leading_left(columns: Sequence[Column[T]]) -> int:
    """How many columns, from the first, hold text (left-aligned) rather than numbers."""
    n = 0
    for c in columns:
        if c.justify != "left":
            break
        n += 1
    return n


def select(columns: Iterable[Column[T]], keys: Sequence[str]) -> tuple[Column[T], ...]:
    """The columns named by ``keys``, in that order (a renderer's choice of what to show)."""
    by_key = {c.key: c for c in columns}
    return tuple(by_key[k] for k in keys)


# --------------------------------------------------------------------------- plain text


def _fixed(cells: Sequence[str], widths: Sequence[int], justify: Sequence[Justify]) -> str:
    return "  ".join(c.ljust(w) if j == "left" else c.rjust(w)
                     for c, w, j in zip(cells, widths, justify, strict=False)).rstrip()


def text_table(header: Sequence[str], rows: Iterable[Sequence[object]], *, widths: Sequence[int] | None = None,
               justify: Sequence[Justify] | None = None, rule: bool = False) -> str:
    """The plain-text table writer (probe CLI, text reports, the study's summary): columns two
    spaces apart, by default the first left-aligned and the others right-aligned. ``widths``: each
    column's width, where a wider cell pushes its own line only (the lines of a table of declared
    columns, whether printed together or one at a time); by default each column is as wide as its
    widest cell. ``rule``: a line of dashes under the header."""
    lines = [[str(c) for c in r] for r in rows]
    widths = widths or [max(len(r[i]) for r in [header, *lines] if i < len(r)) for i in range(len(header))]
    right: list[Justify] = ["right"] * (len(header) - 1)
    justify = justify or ["left", *right]
    ruled = ["  ".join("-" * w for w in widths)] if rule else []
    return "\n".join([_fixed(header, widths, justify), *ruled, *(_fixed(r, widths, justify) for r in lines)])


def fixed_line(columns: Sequence[Column[T]], cells: dict[str, str]) -> str:
    """One row of declared columns as fixed-width text (cells wider than their column push, never cut)."""
    return _fixed([cells.get(c.key, fmt.NA) for c in columns], [c.width for c in columns], [c.justify for c in columns])


def header_line(columns: Sequence[Column[T]]) -> str:
    return fixed_line(columns, {c.key: c.header for c in columns})


def column_table(columns: Sequence[Column[T]], items: Iterable[T]) -> str:
    """A whole table of declared columns as fixed-width lines: header, then one line per item."""
    return text_table(headers(columns), [row(columns, i) for i in items], widths=[c.width for c in columns],
                      justify=[c.justify for c in columns])


# --------------------------------------------------------------------------- sweep levels


@dataclass(frozen=True)
class LevelFigures:
    """One sweep level as its table row shows it: a merged LevelResult, or a running level's
    latest window (the TUI's live row). Cost and GPU utilisation come from outside the event."""

    mode: str
    level: float
    status: str
    throughput_ips: float | None = None
    throughput_rps: float | None = None
    latency: ev.LatencyStats | None = None
    server: ev.ServerBreakdown | None = None
    audit: ev.ClientAudit | None = None
    errors: int = 0
    cost_per_1000: float | None = None  # dollars per 1000 images at this level's throughput
    gpu_util: float | None = None  # mean utilisation of the level's GPUs, percent points
    label: str = ""  # shown instead of the level: one endpoint's row under its level ("  ep1")
    stream: ev.StreamStats | None = None  # a streaming level's TTFT, ITL and tokens/s
    cost_per_million_tokens: float | None = None  # dollars per million output tokens (a streaming level)
    sequence: ev.SequenceStats | None = None  # a sequence model's first-step and later-step latency, sequences/s
    cache: ev.ServerCache | None = None  # an LLM server's cache over the level (its /metrics)

    @classmethod
    def of(cls, result: ev.LevelResult, cost_per_1000: float | None = None,
           gpu_util: float | None = None) -> LevelFigures:
        return cls(
            mode=result.mode, level=result.level, status=result.status, throughput_ips=result.throughput_ips,
            throughput_rps=result.throughput_rps, latency=result.latency, server=result.server,
            audit=result.audit, errors=result.errors, cost_per_1000=cost_per_1000, gpu_util=gpu_util,
            stream=result.stream, sequence=result.sequence, cache=result.cache,
        )


def _endpoint_status(ep: ev.EndpointResult) -> str:
    """"failed", "ok", or "idle": a server the level gave no connection (fewer in flight than
    servers) and no rate, so its empty row is not read as a server that answered nothing."""
    if ep.failed:
        return "failed"
    return "idle" if ep.connections == 0 and not ep.target_rate and ep.requests == 0 else "ok"


def endpoint_figures(result: ev.LevelResult) -> list[LevelFigures]:
    """A level spread over several servers, or driven from several client hosts: one row per
    endpoint and per host, to show under the level's."""
    return [
        LevelFigures(mode=result.mode, level=result.level, status=_endpoint_status(ep),
                     throughput_ips=ep.throughput_ips, throughput_rps=ep.throughput_rps, latency=ep.latency,
                     server=ep.server, errors=ep.errors, label=f"  {ep.name}")
        for ep in result.endpoints
    ] + [
        LevelFigures(mode=result.mode, level=result.level, status="missing" if h.missing else "ok",
                     throughput_ips=h.throughput_ips, throughput_rps=h.throughput_rps, latency=h.latency,
                     audit=h.audit, errors=h.errors, label=f"  host{h.rank}")
        for h in result.hosts
    ]


def compute_seconds(server: ev.ServerBreakdown | None) -> float | None:
    """Server compute per request: input + infer + output (queue excluded)."""
    if server is None:
        return None
    known = [p for p in (server.compute_input, server.compute_infer, server.compute_output) if p is not None]
    return sum(known) if known else None


def _latency(key: str) -> Callable[[LevelFigures], str]:
    return lambda f: fmt.ms(getattr(f.latency, key) if f.latency else None)


def _step_p99(f: LevelFigures, first: bool) -> float | None:
    """A sequence step's p99 latency; None (shown as not measured) where there is no such step."""
    if f.sequence is None:
        return None
    stats = f.sequence.first_step if first else f.sequence.later_steps
    return stats.p99 if stats.count else None


# how warm the server's cache was when the level began (engine/load/cache_reads.py), in a cell
CACHE_STATE_CELL = {"cold": "cold", "warm from earlier levels": "warm", "warm from before this sweep": "prior",
                    "cold: reset before the level": "reset"}
CACHE_STATE_NOTE = ("cache: cold = the server had taken no prompt before the level; warm = it held what earlier "
                    "levels sent; prior = what it took before this sweep; reset = emptied before the level "
                    "(load.cache_reset)")


def _cache_state(f: LevelFigures) -> str:
    return CACHE_STATE_CELL.get(f.cache.state, fmt.NA) if f.cache is not None else fmt.NA


def _client(f: LevelFigures) -> str:
    return fmt.NA if f.audit is None else ("BOUND" if f.audit.client_bound else "ok")


SWEEP: tuple[Column[LevelFigures], ...] = (
    Column("level", "level", lambda f: f.label or fmt.level(f.mode, f.level), 6),
    Column("status", "status", lambda f: f.status, 11, "left"),
    Column("ips", "infer/s", lambda f: fmt.rate(f.throughput_ips), 8),
    Column("rps", "req/s", lambda f: fmt.rate(f.throughput_rps), 8, optional=True),
    Column("p50", "p50 ms", _latency("p50"), 7, short="p50"),
    Column("p90", "p90 ms", _latency("p90"), 7, optional=True, short="p90"),
    Column("p95", "p95 ms", _latency("p95"), 7, short="p95"),
    Column("p99", "p99 ms", _latency("p99"), 7, short="p99"),
    Column("mean", "mean ms", _latency("mean"), 7, optional=True, short="mean"),
    Column("queue", "queue ms", lambda f: fmt.ms(f.server.queue if f.server else None), 8, short="queue"),
    Column("compute", "compute ms", lambda f: fmt.ms(compute_seconds(f.server)), 10, short="compute"),
    # a decoupled model's server time has no queue/compute split (engine/analysis/stream_split.py):
    # this one column stands for the two (without_split), where they would show what is not the stream's
    Column("split", "server split", lambda f: "not measured", 12, optional=True, short="split"),
    Column("batch", "avg batch", lambda f: fmt.batch(f.server.avg_batch_size if f.server else None), 9,
           optional=True, short="batch"),
    Column("client", "client", _client, 6, "left"),
    Column("errors", "errors", lambda f: str(f.errors), 6, optional=True),
    Column("gpu_util", "GPU util", lambda f: fmt.percent_points(f.gpu_util), 8, optional=True, short="util"),
    Column("cost", "$/1k img", lambda f: fmt.money(f.cost_per_1000), 8, optional=True),
    Column("ttft_p50", "TTFT p50 ms", lambda f: fmt.ms(f.stream.ttft.p50 if f.stream else None), 11, short="TTFT50"),
    Column("ttft_p99", "TTFT p99 ms", lambda f: fmt.ms(f.stream.ttft.p99 if f.stream else None), 11, short="TTFT99"),
    Column("itl_p50", "ITL p50 ms", lambda f: fmt.ms(f.stream.itl.p50 if f.stream else None), 10, optional=True,
           short="ITL50"),
    Column("itl_p99", "ITL p99 ms", lambda f: fmt.ms(f.stream.itl.p99 if f.stream else None), 10, short="ITL99"),
    Column("tokens", "tok/s", lambda f: _words(f, fmt.rate(f.stream.output_tokens_per_s if f.stream else None)), 8),
    Column("cost_mtok", "$/Mtok", lambda f: _words(f, fmt.money(f.cost_per_million_tokens)), 8, optional=True),
    # a sequence model's: the sequence's first step (it sets up the state) apart from its later steps
    Column("first_p99", "1st step p99", lambda f: fmt.ms(_step_p99(f, first=True)), 12, short="1st99"),
    Column("later_p99", "later p99", lambda f: fmt.ms(_step_p99(f, first=False)), 9, short="later99"),
    Column("seq_rate", "seq/s", lambda f: fmt.rate(f.sequence.sequences_per_s if f.sequence else None), 8),
    # an LLM server's own cache (its /metrics): "-" where it publishes no such figure
    Column("prefix_hit", "prefix hit", lambda f: fmt.percent(f.cache.hit_rate if f.cache else None), 10, short="hit"),
    Column("kv_usage", "KV use", lambda f: fmt.percent(f.cache.kv_usage if f.cache else None), 6, optional=True,
           short="KV"),
    Column("preempt", "preempt", lambda f: fmt.count(f.cache.preemptions if f.cache else None), 7, optional=True),
    Column("cache_state", "cache", _cache_state, 5, "left", optional=True),
)

# what a terminal shows (the TUI, the headless log) and what a report shows
SWEEP_SCREEN = select(SWEEP, ("level", "ips", "p50", "p95", "p99", "queue", "compute", "batch", "status", "client",
                              "errors", "cost"))
SWEEP_REPORT = select(SWEEP, ("level", "status", "ips", "rps", "p50", "p90", "p95", "p99", "mean", "errors",
                              "gpu_util", "cost"))


STREAM_KEYS = ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99", "tokens")


def with_stream(columns: Sequence[Column[LevelFigures]], priced: bool = False) -> tuple[Column[LevelFigures], ...]:
    """A streaming sweep's columns: TTFT, ITL and output tokens/s after the request latency's p99
    (which is the latency to the final response), and $ per million tokens where it is priced
    instead of $ per 1000 images (a stream's requests are not images). The errors column stays,
    kept where room is short: the stream columns would else crowd it out."""
    extra = select(SWEEP, (*STREAM_KEYS, "cost_mtok") if priced else STREAM_KEYS)
    columns = [replace(c, optional=False) if c.key == "errors" else c for c in columns if c.key != "cost"]
    if not any(c.key == "errors" for c in columns):
        columns.append(replace(*select(SWEEP, ("errors",)), optional=False))
    out: list[Column[LevelFigures]] = []
    for c in columns:
        out.append(c)
        if c.key == "p99":
            out.extend(extra)
    return tuple(out) if len(out) > len(columns) else (*columns, *extra)


SEQUENCE_KEYS = ("first_p99", "later_p99", "seq_rate")


def with_sequence(columns: Sequence[Column[LevelFigures]]) -> tuple[Column[LevelFigures], ...]:
    """A sequence model's columns after the latency's p99: the first step's p99, the later
    steps', sequences per second, and Triton's queue time where the table has none (a report's:
    the wait for a sequence slot when all are held is in it)."""
    queue = () if any(c.key == "queue" for c in columns) else ("queue",)
    extra = select(SWEEP, (*SEQUENCE_KEYS, *queue))
    out: list[Column[LevelFigures]] = []
    for c in columns:
        out.append(c)
        if c.key == "p99":
            out.extend(extra)
    return tuple(out) if len(out) > len(columns) else (*columns, *extra)


CACHE_KEYS = ("prefix_hit", "kv_usage", "preempt", "cache_state")


def with_cache(columns: Sequence[Column[LevelFigures]]) -> tuple[Column[LevelFigures], ...]:
    """An LLM server's cache figures (prefix hit rate, KV usage, preemptions, its state at the
    level's start) after tok/s and $/Mtok, for a sweep whose levels read the server's cache."""
    extra = select(SWEEP, CACHE_KEYS)
    out: list[Column[LevelFigures]] = []
    for c in columns:
        out.append(c)
        if c.key == ("cost_mtok" if any(k.key == "cost_mtok" for k in columns) else "tokens"):
            out.extend(extra)
    return tuple(out) if len(out) > len(columns) else (*columns, *extra)


def without_split(columns: Sequence[Column[LevelFigures]]) -> tuple[Column[LevelFigures], ...]:
    """The queue and compute columns as one that says the split is not measured."""
    split = replace(*select(SWEEP, ("split",)), optional=False)
    out: list[Column[LevelFigures]] = []
    for c in columns:
        if c.key in ("queue", "compute"):
            if split not in out:
                out.append(split)
        else:
            out.append(c)
    return tuple(out)


def without_cost(columns: Sequence[Column[LevelFigures]], cost_per_hour: float | None) -> tuple[Column[LevelFigures], ...]:
    """No cost column when the profile has no price: an empty column says nothing."""
    return tuple(columns) if (cost_per_hour or 0) > 0 else tuple(c for c in columns if c.key != "cost")


# --------------------------------------------------------------------------- training probe


def _single(r: ev.ProbeResult) -> float | None:
    """The 1-GPU samples/s this row scales from (the engine fills the baseline in)."""
    if r.world_size == 1:
        return r.samples_per_s.mean
    return r.baseline_samples_per_s.mean if r.baseline_samples_per_s else None


def _ci(r: ev.ProbeResult) -> str:
    s = r.samples_per_s
    if s.ci_low is None or s.ci_high is None:
        return fmt.NA
    return "±" + fmt.rate((s.ci_high - s.ci_low) / 2)


PROBE: tuple[Column[ev.ProbeResult], ...] = (
    Column("model", "model", lambda r: r.model, 12, "left"),
    Column("strategy", "strategy", lambda r: r.strategy, 8, "left", short="strat"),
    Column("scaling", "scaling", lambda r: r.scaling, 7, "left", optional=True),
    Column("batch", "batch", lambda r: str(r.per_device_batch), 5),
    Column("gpus", "GPUs", lambda r: str(r.world_size), 4),
    Column("single", "single/s", lambda r: fmt.rate(_single(r)), 9, short="single"),
    Column("multi", "multi/s", lambda r: fmt.rate(r.samples_per_s.mean if r.world_size > 1 else None), 9,
           short="multi"),
    Column("ci", "95% CI", _ci, 9, optional=True),
    Column("speedup", "speedup", lambda r: fmt.times(r.speedup), 7, short="spd"),
    Column("efficiency", "effic.", lambda r: fmt.percent(r.efficiency), 6, short="eff"),
    Column("comm", "comm", lambda r: fmt.percent(r.comm_overhead), 5, optional=True),
    Column("mem", "GiB/GPU", lambda r: fmt.gib(max(r.peak_mem_bytes) if r.peak_mem_bytes else None), 7,
           short="mem"),
    Column("util", "GPU util", lambda r: fmt.percent_points(_mean_of_known(r.gpu_util)), 8, short="util"),
    Column("p", "p-value", lambda r: fmt.p_value(r.p_value, r.significant), 7, optional=True),
    Column("step", "step ms", lambda r: fmt.ms(r.step_time_s.mean), 7, optional=True, short="step"),
)


# --------------------------------------------------------------------------- training bill


def _range(interval: Interval | None, reading: Callable[[float | None], str]) -> str:
    """A CI as "low-high": the interval of a reciprocal is not symmetric, so no "±"."""
    if interval is None or interval.low is None:
        return fmt.NA
    if interval.high is None:  # the throughput's lower bound reached 0: no upper bound
        return ">=" + reading(interval.low)
    return f"{reading(interval.low)}-{reading(interval.high)}"


BILL: tuple[Column[BillRow], ...] = (
    Column("model", "model", lambda b: b.result.model, 12, "left"),
    Column("strategy", "strategy", lambda b: b.result.strategy, 8, "left", short="strat"),
    Column("scaling", "scaling", lambda b: b.result.scaling, 7, "left", optional=True),
    Column("batch", "batch", lambda b: str(b.result.per_device_batch), 5),
    Column("gpus", "GPUs", lambda b: str(b.result.world_size), 4),
    Column("rate", "samples/s", lambda b: fmt.rate(b.result.samples_per_s.mean), 9, optional=True, short="/s"),
    Column("epoch", "epoch", lambda b: fmt.epoch_time(b.epoch_s.mean if b.epoch_s else None), 7),
    Column("epoch_ci", "epoch 95% CI", lambda b: _range(b.epoch_s, fmt.epoch_time), 15, short="CI"),
    Column("price", "$/hr", lambda b: fmt.money(b.price_per_hour), 7, optional=True),
    Column("cost", "$/epoch", lambda b: fmt.money(b.cost.mean if b.cost else None), 9),
    Column("cost_ci", "$/epoch 95% CI", lambda b: _range(b.cost, fmt.money), 19, short="$ CI"),
)


def bill_columns(bill: TrainingBill) -> tuple[Column[BillRow], ...]:
    """No dollar columns without a price."""
    return BILL if bill.has_cost else tuple(c for c in BILL if c.key not in ("price", "cost", "cost_ci"))


def bill_notes(bill: TrainingBill) -> list[str]:
    """The lines under the bill's table: how it is priced, what to set, where to stop (and why)."""
    lines = [line for line in (bill.pricing, bill.missing) if line]
    lines += [f"{s.label}: {s.stop.reason}" for s in bill.stops]
    return lines


# --------------------------------------------------------------------------- all-reduce

AllReduceItem = tuple[ev.AllReduceResult, ev.AllReduceRow]


def _of_link(item: AllReduceItem) -> str:
    result, r = item
    return fmt.percent(r.busbw_gbps / result.link_limit_gbps) if result.link_limit_gbps else fmt.NA


ALLREDUCE: tuple[Column[AllReduceItem], ...] = (
    Column("size", "size", lambda i: fmt.size(i[1].size_bytes), 9),
    Column("time", "time us", lambda i: fmt.us(i[1].time_s), 9, short="us"),
    Column("algbw", "algbw GB/s", lambda i: fmt.gbps(i[1].algbw_gbps), 10),
    Column("busbw", "busbw GB/s", lambda i: fmt.gbps(i[1].busbw_gbps), 10),
    Column("limit", "% of link", _of_link, 9, optional=True),
)


def allreduce_columns(result: ev.AllReduceResult) -> tuple[Column[AllReduceItem], ...]:
    """No "% of link" column where the link's limit is unknown."""
    return ALLREDUCE if result.link_limit_gbps else tuple(c for c in ALLREDUCE if c.key != "limit")


def allreduce_items(result: ev.AllReduceResult) -> list[AllReduceItem]:
    return [(result, r) for r in result.rows]


def allreduce_title(result: ev.AllReduceResult) -> str:
    link = f", {result.link}" if result.link else ""
    limit = f", link limit {result.link_limit_gbps:g} GB/s" if result.link_limit_gbps else ""
    return f"all-reduce, {result.world_size} ranks, {result.backend} on {result.device}{link}{limit}"


# --------------------------------------------------------------------------- wire check


@dataclass(frozen=True)
class WireFigures:
    """One level of the wire check, beside the model's throughput at that level (where known)."""

    mode: str
    wire: ev.WireLevel
    model_ips: float | None = None


def _model_share(f: WireFigures) -> str:
    if f.model_ips is None or f.wire.throughput_ips <= 0:
        return fmt.NA
    return fmt.percent(f.model_ips / f.wire.throughput_ips)


WIRE: tuple[Column[WireFigures], ...] = (
    Column("level", "level", lambda f: fmt.level(f.mode, f.wire.level), 6),
    Column("status", "status", lambda f: f.wire.status, 11, "left"),
    Column("ips", "wire infer/s", lambda f: fmt.rate(f.wire.throughput_ips), 12),
    Column("rps", "wire req/s", lambda f: fmt.rate(f.wire.throughput_rps), 10, optional=True),
    Column("p50", "p50 ms", lambda f: fmt.ms(f.wire.p50), 7),
    Column("p99", "p99 ms", lambda f: fmt.ms(f.wire.p99), 7),
    Column("errors", "errors", lambda f: str(f.wire.errors), 6),
    Column("bound", "client-bound", lambda f: "yes" if f.wire.client_bound else "no", 12),
    Column("model_ips", "model infer/s", lambda f: fmt.rate(f.model_ips), 13, optional=True),
    Column("share", "model / wire", _model_share, 12, optional=True),
)

WIRE_SCREEN = select(WIRE, ("level", "status", "ips", "p50", "p99", "errors", "bound"))
