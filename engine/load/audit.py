"""The client judging itself (pure): is the load generator, not the server, the limit?

Rules, each with its reason (the thresholds are ours unless named):
* a load worker busy >= 90 % of a core: its single event loop cannot go faster;
* all load workers together >= 90 % of the machine's cores;
* event-loop lag p99 > max(2 ms, 25 % of the p50 latency) while a worker is busy >= 50 % of a
  core or waited for a CPU >= 10 % of the time (run-queue wait, Linux schedstat): responses
  wait in the client before they are timestamped, behind its own work or because the
  machine's CPUs are taken (on a small box: by the very server being measured). (2 ms floor:
  an idle selector rounds its timeout up to whole milliseconds, so the probe itself reads up
  to 1 ms.) Lag with a worker neither busy nor waiting is reported, not blamed.
* rate mode: more than 1 % of requests sent late (perf_analyzer's warning threshold).
* our side adds more than ``delay_limit`` of the mean latency, measured per request (worker.py):
  the response unread in our socket (an upper bound from the loop's select() timestamps),
  reading it, and in rate mode the send's delay. The other rules see the causes (CPU, lag, late
  sends); this one sees the effect on the figure itself, whatever its cause. The limit is the
  transport's (engine/transport_table.py): 10 % for every transport today, whose measure is an
  upper bound (the socket's unread time; grpc on our own HTTP/2 too); a transport whose measure
  were only a lower bound (a protocol library's untimed part) would take 5 %, the fidelity bar.
"""

from __future__ import annotations

import numpy as np

from engine.analysis.percentiles import percentile_index
from engine.events import ClientAudit
from engine.load.windows import Aggregate
from engine.transport_table import transport_spec

BUSY_CORE_FRACTION = 0.90
LAG_FLOOR_S = 0.002
LAG_FRACTION_OF_P50 = 0.25
LAG_BUSY_FRACTION = 0.50
LAG_WAIT_FRACTION = 0.10
LATE_FRACTION = 0.01
CLIENT_DELAY_FRACTION = 0.10  # the limit of a transport the table does not know (engine/transport_table.py)


def delay_limit(transport: str) -> float:
    """The share of the mean latency our side may add before a level is client-bound: the
    transport's (engine/transport_table.py); a name the table does not know gets the default."""
    return transport_spec(transport).delay_limit


def p99_seconds(samples_ns: np.ndarray) -> float | None:
    return quantile_seconds(samples_ns, 99)


def quantile_seconds(samples_ns: np.ndarray, q: float) -> float | None:
    if samples_ns.size == 0:
        return None
    data = np.sort(samples_ns)
    return float(data[percentile_index(data.size, q)]) / 1e9


def client_audit(
    agg: Aggregate,
    cpu_cores: int,
    latency_p50_s: float | None,
    latency_mean_s: float | None,
    server_total_s: float | None,
    rate_mode: bool,
    client_delay_limit: float = CLIENT_DELAY_FRACTION,
) -> ClientAudit:
    reasons: list[str] = []
    duration_ns = agg.duration_s * 1e9
    cpu_percent = None
    busiest_fraction = 0.0
    if duration_ns > 0 and agg.cpu_ns:
        cpu_percent = 100.0 * sum(agg.cpu_ns.values()) / duration_ns
        worker, busiest = max(agg.cpu_ns.items(), key=lambda kv: kv[1])
        busiest_fraction = busiest / duration_ns
        if busiest / duration_ns >= BUSY_CORE_FRACTION:
            reasons.append(f"load worker {worker} busy {100 * busiest / duration_ns:.0f} % of a core")
        if cpu_percent >= 100.0 * BUSY_CORE_FRACTION * cpu_cores and len(agg.cpu_ns) > 1:
            reasons.append(f"load workers use {cpu_percent:.0f} % of {cpu_cores} cores")
    lags = [p for p in (p99_seconds(a) for a in agg.lag_ns.values()) if p is not None]
    lag_p99 = max(lags) if lags else None
    waited = max(agg.wait_ns.values()) / duration_ns if agg.wait_ns and duration_ns > 0 else 0.0
    limit = max(LAG_FLOOR_S, LAG_FRACTION_OF_P50 * (latency_p50_s or 0.0))
    if lag_p99 is not None and lag_p99 > limit:
        why = []
        if busiest_fraction >= LAG_BUSY_FRACTION:
            why.append(f"a worker busy {100 * busiest_fraction:.0f} % of a core")
        if waited >= LAG_WAIT_FRACTION:
            why.append(f"a worker waiting for a CPU {100 * waited:.0f} % of the time (CPUs contended)")
        if why:
            reasons.append(f"event-loop lag p99 {lag_p99 * 1e3:.1f} ms (limit {limit * 1e3:.1f} ms): {', '.join(why)}")
    if rate_mode and agg.sent and agg.late / agg.sent > LATE_FRACTION:
        reasons.append(f"{100 * agg.late / agg.sent:.1f} % of requests sent late (> 1 ms after their time)")
    overhead = None
    if latency_mean_s and server_total_s is not None and latency_mean_s > 0:
        overhead = max(0.0, (latency_mean_s - server_total_s) / latency_mean_s)
    delay_fraction = None
    if agg.client_ns.size and agg.latency_ns.size:
        mean_latency = float(agg.latency_ns.mean())
        if mean_latency > 0:
            delay_fraction = float(agg.client_ns.mean()) / mean_latency
            if delay_fraction > client_delay_limit:
                reasons.append(
                    f"our side adds {100 * delay_fraction:.1f} % of the mean latency"
                    f" ({float(agg.client_ns.mean()) / 1e3:.0f} µs a request: responses unread in the client,"
                    f" reading, the protocol library's part, late sends; limit {100 * client_delay_limit:.0f} %)"
                )
    return ClientAudit(
        write_p50=quantile_seconds(agg.write_ns, 50),
        write_p99=quantile_seconds(agg.write_ns, 99),
        first_byte_p50=quantile_seconds(agg.server_wait_ns, 50),
        client_delay_p50=quantile_seconds(agg.client_ns, 50),
        client_delay_p99=quantile_seconds(agg.client_ns, 99),
        client_delay_fraction=delay_fraction,
        cpu_wait_fraction=waited if agg.wait_ns and duration_ns > 0 else None,
        cpu_percent=cpu_percent,
        cpu_cores=cpu_cores,
        loop_lag_p99=lag_p99,
        late_sends=agg.late,
        sent=agg.sent,
        overhead_fraction=overhead,
        client_bound=bool(reasons),
        reasons=reasons,
    )
