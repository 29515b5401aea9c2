"""Plain-text tables of probe results (the CLI's summary; no Rich, no Textual).

Columns follow seed 002's table: batch, samples/s with its 95 % CI, speedup and efficiency
against one device, memory per GPU, GPU utilisation, plus step time, communication share and
Welch's p against one device ("n.s." where the difference is not significant).
"""

from __future__ import annotations

from engine.events import AllReduceResult, ProbeResult, StatSummary


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def _ci(s: StatSummary) -> str:
    if s.ci_low is None or s.ci_high is None:
        return f"{s.mean:,.1f}"
    return f"{s.mean:,.1f} ± {(s.ci_high - s.ci_low) / 2:,.1f}"


def _gib(values: list[int]) -> str:
    return "-" if not values else f"{max(values) / 2**30:.2f} GiB"


def _util(values: list[float]) -> str:
    return "-" if not values else f"{sum(values) / len(values):.0f}%"


def _p(r: ProbeResult) -> str:
    if r.p_value is None:
        return "-"
    return f"{r.p_value:.3g}" + ("" if r.significant else " n.s.")


def _render(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) if i > 2 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False))) for row in rows]
    return "\n".join(lines)


def probe_table(results: list[ProbeResult]) -> str:
    header = ["model", "strategy", "scaling", "N", "batch/dev", "global", "samples/s (95% CI)",
              "step ms", "speedup", "eff", "comm", "mem/GPU (max)", "GPU util", "p vs N=1"]
    rows = [
        [r.model, r.strategy, r.scaling, str(r.world_size), str(r.per_device_batch), str(r.global_batch),
         _ci(r.samples_per_s), _num(r.step_time_s.mean * 1e3, ".2f"), _num(r.speedup, ".2f"),
         _num(None if r.efficiency is None else r.efficiency * 100, ".0f") + ("%" if r.efficiency is not None else ""),
         _num(None if r.comm_overhead is None else r.comm_overhead * 100, ".0f")
         + ("%" if r.comm_overhead is not None else ""),
         _gib(r.peak_mem_bytes), _util(r.gpu_util), _p(r)]
        for r in sorted(results, key=lambda r: (r.model, r.scaling, r.per_device_batch * r.world_size
                                                if r.scaling == "strong" else r.per_device_batch, r.world_size))
    ]
    return _render(header, rows) if rows else "(no training results)"


def _size(n: int) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def allreduce_table(sweep: AllReduceResult) -> str:
    limit = sweep.link_limit_gbps
    title = f"all-reduce, {sweep.world_size} ranks, {sweep.backend} on {sweep.device}; link: {sweep.link or '-'}"
    if limit:
        title += f" ({limit:.0f} GB/s per direction)"
    header = ["size", "time us", "algbw GB/s", "busbw GB/s", "busbw / link"]
    rows = [
        [_size(row.size_bytes), f"{row.time_s * 1e6:,.1f}", f"{row.algbw_gbps:.3f}", f"{row.busbw_gbps:.3f}",
         f"{row.busbw_gbps / limit * 100:.0f}%" if limit else "-"]
        for row in sweep.rows
    ]
    return title + "\n" + _render(header, rows)
