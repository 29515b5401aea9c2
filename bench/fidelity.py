"""Our load engine against perf_analyzer: same server, model, batch and windows, in one run.

For each model the embedded Triton starts once; at each concurrency level both tools run in
alternation (the order flips every level and round) and each row gives our throughput / theirs,
p50 and p99 ratios, each client's CPU and run-queue wait per request and the busiest server HTTP
thread. With --rates-of-peak both then run open-loop at fractions of the peak found in the same
run (ours in rate mode, perf_analyzer with --request-rate-range, both constant arrival); ours is
reported corrected for coordinated omission (from each request's intended send) and uncorrected
(from its actual send, perf_analyzer's way). Both tools use perf_analyzer's method with the same
settings: windows of --window-ms, stable when 3 windows agree within --stability %, at most
--max-windows. A level perf_analyzer cannot stabilise shows as n/a with its error line. The JSON
goes to $OUT or .bench-out/, rewritten after every row (a cut-off run keeps its rows).

Two stages: `fidelity` (the targets of bench/fidelity_targets.py per level) and `client_cpu`
(the identity model on the CPU variant: what each client spends per request).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.common import CpuAwake, out_dir, stamp
from bench.fidelity_targets import cell_verdict
from bench.tools import (
    Measure,
    SetupError,
    ensure_perf_analyzer,
    run_floor,
    run_ours,
    run_perf_analyzer,
    spread_text,
)

PA = tuple[Path, dict[str, str]]
PA_PROTOCOL = {"http": "http", "grpc": "grpc"}  # our load.transport -> perf_analyzer's -i, its anchor


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt(x: float | None, spec: str) -> str:
    return format(x, spec) if x is not None else "n/a"


def _pct(x: float | None, spec: str = ".1f") -> str:
    return f"{format(100 * x, spec)} %" if x is not None else "n/a"


class Budget:
    """A time limit for the whole bench (--budget-s): a run is not started when it would end
    past the limit, so a wrapper's `timeout` never has to cut one off (the summary and the
    JSON then still come). A run's expected length: the mean wall time of the same tool's runs
    in this mode so far, else every window plus a start-up allowance."""

    def __init__(self, budget_s: float, args: argparse.Namespace) -> None:
        self.deadline = time.monotonic() + budget_s if budget_s > 0 else None
        self.default_s = args.window_ms / 1000 * args.max_windows + args.run_overhead_s
        self.walls: dict[tuple[str, str], list[float]] = {}
        self.skipped = 0

    def expect(self, tool: str, mode: str) -> float:
        seen = self.walls.get((tool, mode))
        return sum(seen) / len(seen) if seen else self.default_s

    def allows_pair(self, mode: str) -> bool:
        """Whether both tools' runs at one level fit before the deadline."""
        if self.deadline is None:
            return True
        if time.monotonic() + self.expect("pa", mode) + self.expect("ours", mode) <= self.deadline:
            return True
        self.skipped += 1
        return False

    def ran(self, tool: str, mode: str, m: Measure) -> None:
        self.walls.setdefault((tool, mode), []).append(m.wall_s)


def input_data_for(args: argparse.Namespace, model: str) -> str:
    """--input-data for ``model``: its MODEL=PATH entry, else a bare PATH (every model), else ""."""
    bare = ""
    for item in (x.strip() for x in (getattr(args, "input_data", "") or "").split(",") if x.strip()):
        name, sep, path = item.partition("=")
        if not sep:
            bare = item
        elif name == model:
            return path
    return bare


def run_pair(
    model: str, mode: str, level: float, rnd: int, flip: int, url: str, args: argparse.Namespace, pa: PA, budget: Budget,
    pa_extra: tuple[str, ...] = (),
) -> dict | None:
    """Both tools at one level, in an order that flips every level and round. None when the
    budget leaves no time for both."""
    order = ["pa", "ours"] if flip % 2 == 0 else ["ours", "pa"]
    if not budget.allows_pair(mode):
        return None
    got: dict[str, Measure] = {}
    data = input_data_for(args, model)
    if data:  # the same file for both tools: perf_analyzer's --input-data, our load.input_data
        pa_extra = (*pa_extra, "--input-data", data)
    for k, tool in enumerate(order):
        if k == 1 and args.floor and mode == "concurrency" and level == 1 and args.transport == "http":
            got["floor"] = run_floor(url, model, args, input_data=data)  # between the two tools' runs
        if tool == "pa":
            for _ in range(1 + args.pa_retries):
                m = run_perf_analyzer(pa, url, model, level, args, mode, pa_extra, protocol=PA_PROTOCOL[args.transport])
                budget.ran("pa", mode, m)
                if m.ok:
                    break
            got["pa"] = m
        else:
            got["ours"] = run_ours(url, model, level, args, mode, transport=args.transport, input_data=data)
            budget.ran("ours", mode, got["ours"])
    ours, theirs = got["ours"], got["pa"]
    row = {
        "model": model, "mode": mode, "level": level, "round": rnd, "order": order, "transport": args.transport,
        "ours": asdict(ours), "perf_analyzer": asdict(theirs),
        "throughput_ratio": _ratio(ours.throughput, theirs.throughput),
        "p50_ratio": _ratio(ours.p50_ms, theirs.p50_ms),
        "p99_ratio": _ratio(ours.p99_ms, theirs.p99_ms),
    }
    if "floor" in got:
        row["floor"] = asdict(got["floor"])
        row["ours_floor_ratio"] = _ratio(ours.throughput, got["floor"].throughput)
        row["pa_floor_ratio"] = _ratio(theirs.throughput, got["floor"].throughput)
    if mode == "rate":
        row["p50_uncorrected_ratio"] = _ratio(ours.p50_uncorrected_ms, theirs.p50_ms)
        row["p99_uncorrected_ratio"] = _ratio(ours.p99_uncorrected_ms, theirs.p99_ms)
    return row


def _cpus(cpus: list[int]) -> str:
    return ",".join(map(str, cpus)) if cpus else "all"


def print_row(row: dict) -> None:
    o, p = row["ours"], row["perf_analyzer"]
    head = f"c={row['level']:<4g}" if row["mode"] == "concurrency" else f"rate {row['level']:.0f}/s ({100 * row['fraction']:.0f} % of peak)"
    print(
        f"  {head} r{row['round']}  thr {_fmt(o['throughput'], '8.1f')} / {_fmt(p['throughput'], '8.1f')} = {_fmt(row['throughput_ratio'], '5.2f')}"
        f"   p50 {_fmt(o['p50_ms'], '7.3f')} / {_fmt(p['p50_ms'], '7.3f')} ms = {_fmt(row['p50_ratio'], '5.2f')}"
        f"   p99 {_fmt(o['p99_ms'], '7.3f')} / {_fmt(p['p99_ms'], '7.3f')} ms = {_fmt(row['p99_ratio'], '5.2f')}",
        flush=True,
    )
    if row["mode"] == "rate":
        oe, pe = o["extra"], p["extra"]
        print(
            f"      uncorrected (from the actual send): p50 {_fmt(o['p50_uncorrected_ms'], '7.3f')} ms = {_fmt(row['p50_uncorrected_ratio'], '5.2f')}"
            f"   p99 {_fmt(o['p99_uncorrected_ms'], '7.3f')} ms = {_fmt(row['p99_uncorrected_ratio'], '5.2f')}"
            f"   ours: late sends {_pct(oe.get('late_share'), '.2f')}, our side {_pct(oe.get('client_delay_fraction'))} of latency"
            f"   pa: overhead {_fmt(pe.get('overhead_pct'), '.2f')} %, sent {_fmt(pe.get('send_rate'), '.0f')}/s, delayed {_fmt(pe.get('delayed_pct'), '.1f')} %",
            flush=True,
        )
    print(
        f"      per request: client cpu {_fmt(o['client_cpu_us_per_request'], '.0f')} / {_fmt(p['client_cpu_us_per_request'], '.0f')} us,"
        f" client run-queue wait {_fmt(o['client_wait_us_per_request'], '.0f')} / {_fmt(p['client_wait_us_per_request'], '.0f')} us,"
        f" server {_fmt(o['server_us_per_request'], '.0f')} / {_fmt(p['server_us_per_request'], '.0f')} us,"
        f" busiest HTTP thread/threads used {spread_text(o['extra'].get('frontend'))} / {spread_text(p['extra'].get('frontend'))}"
        f"   [ours {o['status']}{' CLIENT-BOUND' if o['extra'].get('client_bound') else ''}; pa {p['status']}]",
        flush=True,
    )
    for w in p["extra"].get("warnings", []):
        print(f"      perf_analyzer: {w}", flush=True)
    if "floor" in row:
        f = row["floor"]
        print(f"      floor (one blocking socket, pre-built bytes): thr {_fmt(f['throughput'], '.1f')}, p50 {_fmt(f['p50_ms'], '.3f')} ms;"
              f" ours / floor {_fmt(row['ours_floor_ratio'], '.3f')}, pa / floor {_fmt(row['pa_floor_ratio'], '.3f')}", flush=True)


def find_peak(rows: list[dict], model: str, source: str) -> tuple[float, float, str] | None:
    """The peak throughput of this model's concurrency levels in this run: the best level's
    mean over rounds, from perf_analyzer ("pa"), ours ("ours") or whichever is higher ("max");
    "pa" and "ours" fall back to the other tool when the first has no result."""
    best: dict[str, tuple[float, float, int]] = {}
    for tool in ("perf_analyzer", "ours"):
        by_level: dict[float, list[float]] = {}
        for r in rows:
            if r["model"] == model and r["mode"] == "concurrency" and r[tool]["throughput"]:
                by_level.setdefault(r["level"], []).append(r[tool]["throughput"])
        if by_level:
            level, xs = max(by_level.items(), key=lambda kv: sum(kv[1]) / len(kv[1]))
            best[tool] = (sum(xs) / len(xs), level, len(xs))
    if not best:
        return None
    if source == "max":
        tool = max(best, key=lambda t: best[t][0])
    else:
        first = "perf_analyzer" if source == "pa" else "ours"
        tool = first if first in best else next(iter(best))
    thr, level, n = best[tool]
    who = "perf_analyzer" if tool == "perf_analyzer" else "our engine"
    fallback = source != "max" and tool != ("perf_analyzer" if source == "pa" else "ours")
    return thr, level, (f"the best concurrency level by {who}: {thr:,.0f} infer/s at c={level:g} (mean of {n} round{'s' * (n > 1)})"
                 + (" - the other tool gave no result at any level" if fallback else ""))


def bench_model(model: str, args: argparse.Namespace, pa: PA, budget: Budget, rows: list[dict], save: Callable[[], None]) -> None:
    from engine.server.embedded import EmbeddedServer

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as logs, EmbeddedServer(
            model=model, variant=args.variant, log_dir=Path(logs), cpus=tuple(args.server_cpus)) as srv:
        print(f"\n== {model}: embedded Triton at {srv.http_url} (variant {srv.variant}), batch {args.batch}, over {args.transport}"
              f" (perf_analyzer -i {PA_PROTOCOL[args.transport]}), ready in {time.monotonic() - t0:.0f} s"
              f"; CPUs: server {_cpus(args.server_cpus)}, clients {_cpus(args.client_cpus)}"
              + (", held awake (cpu_dma_latency 0)" if args.cpus_awake else ""), flush=True)
        flip = 0
        for level in args.levels:
            for rnd in range(args.rounds):
                row = run_pair(model, "concurrency", level, rnd, flip, srv.http_url, args, pa, budget)
                flip += 1
                if row is None:
                    continue
                rows.append(row)
                print_row(row)
                save()
            flip += 1 - args.rounds % 2  # the next level starts with the other tool
        if not args.rates_of_peak:
            return
        if args.peak:
            peak, peak_level, how = args.peak, max(args.levels, default=64), f"given (--peak {args.peak:g})"
        else:
            found = find_peak(rows, model, args.peak_from)
            if found is None:
                print(f"  rate mode skipped: no concurrency level of {model} gave a throughput to take the peak from", flush=True)
                return
            peak, peak_level, how = found
        # perf_analyzer's rate mode sends synchronously from --max-threads threads (default 4),
        # one request in flight each, far below a GPU server's rates. The peak's concurrency is
        # enough threads for any fraction of the peak; more than 256 overloaded its own client
        # on a 32-core box (docs/results/rate_mode_connections_h200.md).
        threads = args.pa_rate_threads or min(256, max(16, int(peak_level)))
        print(f"\n  rate mode (constant arrival): peak {peak:,.0f} infer/s, {how}; perf_analyzer --max-threads {threads}", flush=True)
        args.peaks[model] = {"infer_per_s": peak, "from": how, "pa_max_threads": threads}
        for fraction in args.rates_of_peak:
            rate = fraction * peak / args.batch  # requests/s, both tools
            for rnd in range(args.rounds):
                row = run_pair(model, "rate", rate, rnd, flip, srv.http_url, args, pa, budget, ("--max-threads", str(threads)))
                flip += 1
                if row is None:
                    continue
                row["fraction"] = fraction
                rows.append(row)
                print_row(row)
                save()
            flip += 1 - args.rounds % 2


# --------------------------------------------------------------------------- summary


def _band(xs: list[float]) -> str:
    return f"{sum(xs) / len(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]" if xs else "n/a"


def _spread(xs: list[float]) -> str:
    """(max - min) / mean over rounds: a tool's round-to-round spread."""
    if len(xs) < 2:
        return "n/a"
    return f"{100 * (max(xs) - min(xs)) / (sum(xs) / len(xs)):.1f} %"


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _vals(sel: list[dict], *path: str) -> list[float]:
    out = []
    for r in sel:
        x = r
        for key in path:
            x = x.get(key) if isinstance(x, dict) else None
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            out.append(float(x))
    return out


def _failures(sel: list[dict]) -> str:
    notes = []
    for tool, name in (("ours", "ours"), ("perf_analyzer", "pa")):
        bad = [r[tool]["status"] for r in sel if not r[tool]["ok"]]
        if bad:
            notes.append(f"{name} {len(bad)}/{len(sel)} without result: {bad[0]}")
    return "; ".join(notes)


def _cells(rows: list[dict], models: list[str], key: str, values: list) -> Iterator[tuple[str, Any, list[dict]]]:
    """(model, value, its rows) for each model and level (or rate fraction) that has any."""
    for model in models:
        for value in values:
            sel = [r for r in rows if r["model"] == model and r[key] == value]
            if sel:
                yield model, value, sel


def print_summary(rows: list[dict], args: argparse.Namespace) -> None:
    models = args.models.split(",")
    conc = [r for r in rows if r["mode"] == "concurrency"]
    rate = [r for r in rows if r["mode"] == "rate"]
    print("\nsummary, ours / perf_analyzer. Ratios: mean [min-max] over the rounds where both gave a result."
          " Spread: a tool's (max - min) / mean over its rounds.")
    if conc:
        print("\nconcurrency mode: ratios")
        print(f"  {'model':<18}{'c':>5}{'thr ratio':>20}{'p50 ratio':>20}{'p99 ratio':>20}{'rounds':>8}")
        for model, level, sel in _cells(conc, models, "level", args.levels):
            both = [r for r in sel if r["throughput_ratio"] is not None]
            print(f"  {model:<18}{level:>5}{_band(_vals(both, 'throughput_ratio')):>20}{_band(_vals(both, 'p50_ratio')):>20}"
                  f"{_band(_vals(both, 'p99_ratio')):>20}{len(both):>5}/{len(sel)}")
        print("\nconcurrency mode: each client (ours | perf_analyzer)")
        print(f"  {'model':<18}{'c':>5}{'infer/s':>18}{'thr spread':>18}{'p50 spread':>18}{'cpu us/req':>14}{'wait us/req':>14}"
              f"{'our side':>10}{'pa ovh':>8}  notes")
        for model, level, sel in _cells(conc, models, "level", args.levels):
            thr = {t: _vals(sel, t, "throughput") for t in ("ours", "perf_analyzer")}
            p50 = {t: _vals(sel, t, "p50_ms") for t in ("ours", "perf_analyzer")}
            cpu = {t: _mean(_vals(sel, t, "client_cpu_us_per_request")) for t in ("ours", "perf_analyzer")}
            wait = {t: _mean(_vals(sel, t, "client_wait_us_per_request")) for t in ("ours", "perf_analyzer")}
            side = _mean(_vals(sel, "ours", "extra", "client_delay_fraction"))
            ovh = _mean(_vals(sel, "perf_analyzer", "extra", "overhead_pct"))
            bound = sum(bool(r["ours"]["extra"].get("client_bound")) for r in sel)
            notes = "; ".join(x for x in (f"ours client-bound {bound}/{len(sel)}" if bound else "", _failures(sel)) if x)
            print(f"  {model:<18}{level:>5}{_fmt(_mean(thr['ours']), '8.0f'):>9} |{_fmt(_mean(thr['perf_analyzer']), '7.0f'):>7}"
                  f"{_spread(thr['ours']):>9} |{_spread(thr['perf_analyzer']):>7}{_spread(p50['ours']):>9} |{_spread(p50['perf_analyzer']):>7}"
                  f"{_fmt(cpu['ours'], '.0f'):>7} |{_fmt(cpu['perf_analyzer'], '.0f'):>5}{_fmt(wait['ours'], '.0f'):>7} |{_fmt(wait['perf_analyzer'], '.0f'):>5}"
                  f"{_pct(side, '.0f'):>10}{_fmt(ovh, '.1f') + ' %' if ovh is not None else 'n/a':>8}  {notes}")
    floors = [r for r in conc if "floor" in r]
    if floors:
        print("\nconcurrency 1 against the floor client (one blocking socket, the same pre-built bytes): each tool's throughput / the floor's")
        print(f"  {'model':<18}{'floor infer/s':>15}{'floor spread':>14}{'ours / floor':>20}{'pa / floor':>20}")
        for model in models:
            sel = [r for r in floors if r["model"] == model]
            if sel:
                floor_thr = _vals(sel, "floor", "throughput")
                print(f"  {model:<18}{_fmt(_mean(floor_thr), '.0f'):>15}{_spread(floor_thr):>14}"
                      f"{_band(_vals(sel, 'ours_floor_ratio')):>20}{_band(_vals(sel, 'pa_floor_ratio')):>20}")
    if rate:
        print("\nrate mode (constant arrival): ratios; ours corrected = from the intended send time, uncorrected = from the actual send (perf_analyzer's way)")
        print(f"  {'model':<18}{'of peak':>8}{'req/s':>8}{'thr ratio':>20}{'p50 corr':>20}{'p50 uncorr':>20}{'p99 corr':>20}{'p99 uncorr':>20}{'rounds':>8}")
        for model, fraction, sel in _cells(rate, models, "fraction", args.rates_of_peak):
            both = [r for r in sel if r["throughput_ratio"] is not None]
            print(f"  {model:<18}{100 * fraction:>6.0f} %{sel[0]['level']:>8.0f}{_band(_vals(both, 'throughput_ratio')):>20}"
                  f"{_band(_vals(both, 'p50_ratio')):>20}{_band(_vals(both, 'p50_uncorrected_ratio')):>20}"
                  f"{_band(_vals(both, 'p99_ratio')):>20}{_band(_vals(both, 'p99_uncorrected_ratio')):>20}{len(both):>5}/{len(sel)}")
        print("\nrate mode: each client (ours | perf_analyzer); p50 spread of ours is of the uncorrected p50")
        print(f"  {'model':<18}{'of peak':>8}{'infer/s':>18}{'p50 spread':>18}{'late sends':>12}{'our side':>10}{'cpu us/req':>14}"
              f"{'pa ovh':>8}{'pa delayed':>11}  notes")
        for model, fraction, sel in _cells(rate, models, "fraction", args.rates_of_peak):
            late = _vals(sel, "ours", "extra", "late_share")
            side = _mean(_vals(sel, "ours", "extra", "client_delay_fraction"))
            ovh = _mean(_vals(sel, "perf_analyzer", "extra", "overhead_pct"))
            delayed = _vals(sel, "perf_analyzer", "extra", "delayed_pct")
            cpu = {t: _mean(_vals(sel, t, "client_cpu_us_per_request")) for t in ("ours", "perf_analyzer")}
            warns = sorted({w for r in sel for w in r["perf_analyzer"]["extra"].get("warnings", [])})
            bound = sum(bool(r["ours"]["extra"].get("client_bound")) for r in sel)
            notes = "; ".join(x for x in (
                f"ours client-bound {bound}/{len(sel)}" if bound else "", _failures(sel),
                f"pa warned: {warns[0][:110]}" if warns else "",
            ) if x)
            print(f"  {model:<18}{100 * fraction:>6.0f} %{_fmt(_mean(_vals(sel, 'ours', 'throughput')), '8.0f'):>9} |{_fmt(_mean(_vals(sel, 'perf_analyzer', 'throughput')), '7.0f'):>7}"
                  f"{_spread(_vals(sel, 'ours', 'p50_uncorrected_ms')):>9} |{_spread(_vals(sel, 'perf_analyzer', 'p50_ms')):>7}"
                  f"{_pct(max(late) if late else None, '.2f') + ' max' if late else 'n/a':>12}{_pct(side, '.0f'):>10}"
                  f"{_fmt(cpu['ours'], '.0f'):>7} |{_fmt(cpu['perf_analyzer'], '.0f'):>5}"
                  f"{_fmt(ovh, '.2f') + ' %' if ovh is not None else 'n/a':>8}{_fmt(max(delayed), '.1f') + ' %' if delayed else 'n/a':>11}  {notes}")


def print_targets(rows: list[dict], args: argparse.Namespace) -> None:
    """The fidelity targets per level and rate (bench/fidelity_targets.py)."""
    models = args.models.split(",")
    cells = [(f"c={level:g}", sel) for _, level, sel in _cells([r for r in rows if r["mode"] == "concurrency"],
                                                               models, "level", args.levels)]
    cells += [(f"{100 * fraction:.0f} % of peak", sel) for _, fraction, sel in
              _cells([r for r in rows if r["mode"] == "rate"], models, "fraction", args.rates_of_peak)]
    if not cells:
        return
    print("\ntargets: throughput ratio in [0.95, 1.05] unless perf_analyzer's client was the limit,"
          " p50 within +-10 % (rate mode: uncorrected), our spread <= 5 %")
    for name, sel in cells:
        model = sel[0]["model"]
        print(f"  {model:<18}{name:<14}{cell_verdict(sel).text()}")


def estimate(args: argparse.Namespace) -> tuple[int, float, float]:
    """Runs planned, and the bench's duration from them (seconds, low and high): each run is
    start-up + 3 windows (stable at once) .. max windows, plus one server start per model."""
    models = len(args.models.split(","))
    runs = models * 2 * args.rounds * (len(args.levels) + len(args.rates_of_peak))
    window = args.window_ms / 1000
    low = runs * (args.run_overhead_s + min(3, args.max_windows) * window) + models * args.server_start_s
    high = runs * (args.run_overhead_s + args.max_windows * window) + models * args.server_start_s
    return runs, low, high




def print_client_cpu(rows: list[dict], args: argparse.Namespace) -> None:
    """The client_cpu stage's figure: each client's CPU per request the server served."""
    print("\nclient CPU per request (us, mean [min-max] over the rounds; ratio ours / perf_analyzer)")
    print(f"  {'model':<18}{'c':>5}{'ours':>22}{'perf_analyzer':>22}{'ratio':>8}{'ours infer/s':>14}")
    for model, level, sel in _cells([r for r in rows if r["mode"] == "concurrency"], args.models.split(","), "level", args.levels):
        ours, theirs = _vals(sel, "ours", "client_cpu_us_per_request"), _vals(sel, "perf_analyzer", "client_cpu_us_per_request")
        ratio = _ratio(_mean(ours), _mean(theirs))
        band = lambda xs: f"{sum(xs) / len(xs):.0f} [{min(xs):.0f}-{max(xs):.0f}]" if xs else "n/a"  # noqa: E731
        print(f"  {model:<18}{level:>5}{band(ours):>22}{band(theirs):>22}{_fmt(ratio, '.2f'):>8}"
              f"{_fmt(_mean(_vals(sel, 'ours', 'throughput')), ',.0f'):>14}")


GPU_RUN = {
    "fidelity": "2x H200, one 10-minute device call (on 4x: --variant 4x):\n"
                "  python -m bench fidelity --models openclip_vit_b32 --variant 2x --levels 16,64,128,256,512 "
                "--rates-of-peak 0.25,0.5,0.75 --peak-from max --rounds 3 --window-ms 1000 --max-windows 6 "
                "--pa-retries 0 --budget-s 540 --run-overhead-s 1.5 --server-start-s 10",
    "client_cpu": "the identity model on the CPU variant, on any box (here, or beside a GPU run), about 1 minute:\n"
                  "  python -m bench client_cpu",
}


def build_parser(prog: str, stage: str) -> argparse.ArgumentParser:
    cpu = stage == "client_cpu"
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=("Client CPU per request on the identity model: our engine against perf_analyzer 2.41, same "
                     "server and levels, alternating rounds." if cpu else __doc__.split("\n\n")[0]),
        epilog=f"Fits: {GPU_RUN[stage]}\nperf_analyzer is set up under .wheels/ on first use (pip download; "
               "apt-get install libb64-0d as root). Exit 1: a --budget-s left runs out; 130: stopped (SIGTERM).")
    p.set_defaults(stage=stage)
    p.add_argument("--models", default="identity" if cpu else "identity,vit_tiny", help="embedded models, comma-separated")
    p.add_argument("--transport", default="http", choices=tuple(PA_PROTOCOL),
                   help="our load.transport; perf_analyzer runs -i with the same protocol")
    p.add_argument("--variant", default="cpu", help="the embedded server's config variant: cpu, 1x, 2x, 4x, ...")
    p.add_argument("--levels", default="8,32" if cpu else "1,8,32", help="concurrency levels")
    p.add_argument("--rates-of-peak", default="", help="rate mode at these fractions of the peak, e.g. 0.25,0.5,0.75")
    p.add_argument("--peak-from", choices=("pa", "ours", "max"), default="pa",
                   help="whose best concurrency level gives the peak (default perf_analyzer's, the independent one)")
    p.add_argument("--peak", type=float, default=0.0, help="the peak in infer/s, instead of finding it")
    p.add_argument("--batch", type=int, default=1, help="images per request (perf_analyzer -b)")
    p.add_argument("--window-ms", type=int, default=1000 if cpu else 2000)
    p.add_argument("--stability", type=float, default=10.0, help="percent")
    p.add_argument("--max-windows", type=int, default=4 if cpu else 10)
    p.add_argument("--rounds", type=int, default=2 if cpu else 1)
    p.add_argument("--workers", type=int, default=0, help="our load workers (0 = automatic)")
    p.add_argument("--contended-percent", type=float, default=None,
                   help="our levels' contended mark (load.contended_percent; default the profile's): 100 on a box"
                        " others keep busy, to compare the tools there at all")
    p.add_argument("--input-data", default="", metavar="[MODEL=]PATH,...",
                   help="a perf_analyzer input-data file (JSON or folder) both tools send (theirs: --input-data, "
                        "ours: load.input_data); MODEL=PATH per model, comma-separated, or one PATH for every model")
    p.add_argument("--pa-retries", type=int, default=0 if cpu else 1, help="perf_analyzer runs again after no result")
    p.add_argument("--pa-rate-threads", type=int, default=0,
                   help="perf_analyzer --max-threads in rate mode (0 = the peak's concurrency level, 16 to 256)")
    p.add_argument("--budget-s", type=float, default=0.0, help="start no run that would end later than this (0 = no limit)")
    p.add_argument("--run-overhead-s", type=float, default=1.5 if cpu else 2.0, help="estimate: a tool run's start-up and end, seconds")
    p.add_argument("--server-start-s", type=float, default=5.0 if cpu else 30.0, help="estimate: one embedded server start, seconds")
    p.add_argument("--server-cpus", default="", metavar="0,1",
                   help="host CPUs for the embedded server and its Python stubs (default: all)")
    p.add_argument("--client-cpus", default="", metavar="2,3",
                   help="host CPUs for both clients, ours and perf_analyzer (default: all); apart from --server-cpus,"
                        " neither client takes the server's CPU time, which on a small box decides a sub-ms model's figure")
    p.add_argument("--floor", action="store_true",
                   help="at concurrency 1 over http, also run the floor client between the two tools: one blocking socket"
                        " sending our pre-built bytes; each tool's throughput / the floor's is its own cost per round trip")
    p.add_argument("--cpus-awake", action="store_true",
                   help="hold /dev/cpu_dma_latency at 0 while the bench runs (Linux, root): idle CPUs poll instead of"
                        " halting, so a sub-ms round trip does not pay a VM's wake-up from halt in either tool")
    p.add_argument("--estimate", action="store_true", help="print the planned runs and the duration estimate, run nothing")
    return p


class Stopped(BaseException):
    """SIGTERM (e.g. from `timeout`): stop, keep what was measured, print the summary."""


def _parse_lists(args: argparse.Namespace) -> str | None:
    """Turn --levels, --rates-of-peak and the CPU lists into lists; the error line, if any."""
    try:
        args.levels = [int(x) for x in args.levels.split(",") if x.strip()]
        args.rates_of_peak = [float(x) for x in args.rates_of_peak.split(",") if x.strip()]
    except ValueError as exc:
        return f"--levels / --rates-of-peak: {exc}"
    try:
        args.server_cpus = [int(x) for x in args.server_cpus.split(",") if x.strip()]
        args.client_cpus = [int(x) for x in args.client_cpus.split(",") if x.strip()]
    except ValueError as exc:
        return f"--server-cpus / --client-cpus: {exc}"
    if (args.server_cpus or args.client_cpus) and not hasattr(os, "sched_setaffinity"):
        return "--server-cpus / --client-cpus: this OS has no CPU affinity (Linux only)"
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    unknown = sorted(set(args.server_cpus + args.client_cpus) - usable)
    if unknown:
        return f"CPUs {unknown} are not among this process's CPUs {sorted(usable)}"
    if args.floor and (args.transport != "http" or 1 not in args.levels):
        return "--floor runs at concurrency 1 over http: add 1 to --levels and use --transport http"
    if set(args.server_cpus) & set(args.client_cpus):
        return "--server-cpus and --client-cpus overlap: the point of pinning is to keep them apart"
    if any(f <= 0 for f in args.rates_of_peak) or any(c <= 0 for c in args.levels) or args.rounds < 1:
        return "levels, fractions of the peak and rounds must be > 0"
    if args.rates_of_peak and not args.levels and not args.peak:
        return "rate mode needs concurrency levels to find the peak from, or --peak"
    if not args.levels and not args.rates_of_peak:
        return "nothing to run: no --levels"
    return None


def run(args: argparse.Namespace) -> int:
    error = _parse_lists(args)
    if error:
        print(f"{args.stage}: {error}", file=sys.stderr)
        return 2
    runs, low, high = estimate(args)
    print(f"plan: {runs} tool runs ({args.models}: {len(args.levels)} concurrency levels + {len(args.rates_of_peak)} rates,"
          f" {args.rounds} rounds, 2 tools), {args.window_ms} ms windows, 3..{args.max_windows} windows per run;"
          f" estimate {low:.0f}-{high:.0f} s (assuming {args.run_overhead_s:g} s start-up per run, {args.server_start_s:g} s per server start)"
          + (f"; budget {args.budget_s:.0f} s" if args.budget_s else ""), flush=True)
    if args.estimate:
        return 0
    try:
        pa = ensure_perf_analyzer()
    except SetupError as exc:
        print(f"{args.stage}: {exc}", file=sys.stderr)
        return 2
    if args.client_cpus:  # both clients are children of this process and inherit its CPUs
        os.sched_setaffinity(0, set(args.client_cpus))
    awake = CpuAwake()
    if args.cpus_awake:
        try:
            awake.__enter__()
        except OSError as exc:
            print(f"{args.stage}: --cpus-awake: {exc}", file=sys.stderr)
            return 2
    path = out_dir() / f"{args.stage}-{stamp()}.json"
    rows: list[dict] = []
    args.peaks = {}
    budget = Budget(args.budget_s, args)
    t0 = time.monotonic()

    def save(status: str = "running") -> None:
        doc = {"args": vars(args), "status": status, "elapsed_s": time.monotonic() - t0, "skipped_runs": budget.skipped, "rows": rows}
        path.write_text(json.dumps(doc, indent=1))

    def on_term(signum: int, frame: object) -> None:
        raise Stopped()

    signal.signal(signal.SIGTERM, on_term)
    status, code = "finished", 0
    try:
        for model in args.models.split(","):
            bench_model(model, args, pa, budget, rows, save)
    except (Stopped, KeyboardInterrupt):
        status, code = "interrupted", 130
        print("\ninterrupted: the summary of what was measured follows", flush=True)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        awake.__exit__()
        save(status)
    if budget.skipped and status == "finished":
        status, code = "incomplete", 1  # planned runs were left out: not a finished comparison
        save(status)
    print_summary(rows, args)
    if args.stage == "client_cpu":
        print_client_cpu(rows, args)
    else:
        print_targets(rows, args)
    if budget.skipped:
        print(f"\nbudget: {budget.skipped} pairs of runs were not started (--budget-s {args.budget_s:g})")
    print(f"\n{status} in {time.monotonic() - t0:.0f} s; written: {path}")
    return code
