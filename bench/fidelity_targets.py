"""The fidelity targets, checked per level over the `fidelity` stage's rows (bench/fidelity.py).

Per cell (one model and level, or one rate), over the rounds where both tools gave a result:
- throughput: ours / perf_analyzer's mean ratio in [0.95, 1.05], unless perf_analyzer's own
  client was the limit; then the check does not apply, and the figure that says so is printed;
- p50: the mean ratio within +-10 % (in rate mode the uncorrected one, measured from the actual
  send as perf_analyzer measures; the corrected one is printed beside it);
- our spread: (max - min) / mean over our rounds at most 5 % (of the throughput in concurrency
  mode, of the uncorrected p50 in rate mode, where the throughput is the schedule's).

perf_analyzer's client is taken as the limit when its threads waited for a CPU for at least 5 %
of its mean latency (run-queue wait per request, from /proc), or, in rate mode, when it says it
delayed at least 1 % of its requests. Pure functions: the rows are the bench's JSON rows.
"""

from __future__ import annotations

from dataclasses import dataclass

THROUGHPUT_BAND = (0.95, 1.05)
P50_BAND = 0.10
OUR_SPREAD_MAX = 5.0  # percent
PA_WAIT_SHARE = 0.05  # of its mean latency
PA_DELAYED_PCT = 1.0


@dataclass(frozen=True)
class CellVerdict:
    met: bool
    parts: list[str]  # "throughput 1.02 ok", "p50 1.14 out", ...

    def text(self) -> str:
        return ("met: " if self.met else "NOT met: ") + "; ".join(self.parts)


def _num(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _spread_pct(xs: list[float]) -> float | None:
    return 100 * (max(xs) - min(xs)) / (sum(xs) / len(xs)) if len(xs) >= 2 and sum(xs) > 0 else None


def pa_client_limit(rows: list[dict]) -> str | None:
    """Why perf_analyzer's client was the limit in any of these rounds, or None."""
    worst_share, worst_delayed = 0.0, 0.0
    for r in rows:
        pa = r["perf_analyzer"]
        wait, mean_ms = _num(pa.get("client_wait_us_per_request")), _num(pa.get("mean_ms"))
        if wait is not None and mean_ms:
            worst_share = max(worst_share, wait / (mean_ms * 1000))
        delayed = _num((pa.get("extra") or {}).get("delayed_pct"))
        if delayed is not None:
            worst_delayed = max(worst_delayed, delayed)
    why = []
    if worst_share >= PA_WAIT_SHARE:
        why.append(f"its threads waited for a CPU {100 * worst_share:.0f} % of its latency")
    if worst_delayed >= PA_DELAYED_PCT:
        why.append(f"it delayed {worst_delayed:.1f} % of its requests")
    return ", ".join(why) or None


def cell_verdict(rows: list[dict]) -> CellVerdict:
    """The targets for one cell's rounds (see the module docstring)."""
    rate = bool(rows) and rows[0].get("mode") == "rate"
    both = [r for r in rows if _num(r.get("throughput_ratio")) is not None]
    if not both:
        return CellVerdict(False, ["no round where both tools gave a result"])
    parts, met = [], True
    thr = _mean([float(r["throughput_ratio"]) for r in both])
    limited = pa_client_limit(rows)
    assert thr is not None
    if THROUGHPUT_BAND[0] <= thr <= THROUGHPUT_BAND[1]:
        parts.append(f"throughput {thr:.2f} ok")
    elif limited:
        parts.append(f"throughput {thr:.2f} not judged: perf_analyzer's client was the limit ({limited})")
    else:
        parts.append(f"throughput {thr:.2f} outside [{THROUGHPUT_BAND[0]:.2f}, {THROUGHPUT_BAND[1]:.2f}]")
        met = False
    p50_key = "p50_uncorrected_ratio" if rate else "p50_ratio"
    p50 = _mean([v for r in both if (v := _num(r.get(p50_key))) is not None])
    corrected = _mean([v for r in both if (v := _num(r.get("p50_ratio"))) is not None]) if rate else None
    also = f" (corrected {corrected:.2f})" if corrected is not None else ""
    if p50 is None:
        parts.append("p50 ratio n/a")
        met = False
    elif abs(p50 - 1) <= P50_BAND:
        parts.append(f"p50 {p50:.2f}{also} ok")
    else:
        parts.append(f"p50 {p50:.2f}{also} outside +-{100 * P50_BAND:.0f} %")
        met = False
    ours_key = "p50_uncorrected_ms" if rate else "throughput"
    spread = _spread_pct([v for r in rows if (v := _num(r["ours"].get(ours_key))) is not None])
    if spread is None:
        parts.append("our spread n/a (one round)")
        met = False
    elif spread <= OUR_SPREAD_MAX:
        parts.append(f"our spread {spread:.1f} % ok")
    else:
        parts.append(f"our spread {spread:.1f} % over {OUR_SPREAD_MAX:.0f} %")
        met = False
    return CellVerdict(met, parts)
