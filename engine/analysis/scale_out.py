"""Scale out or scale up, in one line: N one-GPU boxes against one N-GPU box, each priced as
what it is (N times a one-GPU box's $/hr against the N-GPU box's), compared on $ per 1000 images
(a streaming model: $ per million output tokens) at the latency target when the study has one
(what a service can sell), else at the peak.

Pure: the figures come in (throughput, cost per 1000 images, whether the level was stable), the
line goes out, e.g. "at the peak: 4 boxes of 1x RTX 4080: 2,310 images/s at $0.000410/1000;
1 box of 4x RTX 4080: 1,980 images/s at $0.000520/1000 → scale out".
"""

from __future__ import annotations

from dataclasses import dataclass

from engine import format as fmt
from engine.analysis.gates import GATE_FAILURE_EXIT_CODE
from engine.analysis.saturation import UNSTABLE_MARK

TIE = 0.02  # costs per image within 2 % of each other: neither side wins
SCALE_OUT, SCALE_UP, EITHER = "scale out", "scale up", "either"


@dataclass(frozen=True)
class Figure:
    """One side at one point (its peak, or its SLO point)."""

    throughput: float | None  # images/s; None: no result there (at the SLO: no level met it)
    cost_per_1000: float | None  # $ per 1000 images; None: no price
    unstable: bool = False  # drawn from a level whose windows did not agree
    # a streaming model's figure: throughput is output tokens/s and cost_per_1000 is $ per
    # million output tokens
    tokens: bool = False
    # the rate of each window merged into the level (images/s; a streaming level's tokens/s);
    # (): not known. Two figures whose windows overlap cannot be told apart.
    windows: tuple[float, ...] = ()

    def cost_range(self) -> tuple[float, float] | None:
        """The cost per 1000 (per million tokens) each window alone gives, lowest and highest;
        None without a cost or two windows."""
        rates = [r for r in self.windows if r > 0]
        if len(rates) < 2 or self.cost_per_1000 is None or not self.throughput:
            return None
        costs = [self.cost_per_1000 * self.throughput / r for r in rates]
        return min(costs), max(costs)


@dataclass(frozen=True)
class Side:
    label: str  # "4 boxes of 1x RTX 4080"
    price_per_hour: float | None  # what all its boxes cost together; None: not set
    price_hint: str  # what to set when the price is missing, e.g. "--cost 1=DOLLARS"
    peak: Figure
    slo: Figure | None = None  # None: the study has no latency target
    # why this side decides nothing, naming it ("1x*2 failed (server 2 of 2 exited ...)"): its run
    # failed, lost a server or was refused; None: it ran to its end
    failed: str | None = None


@dataclass(frozen=True)
class ScaleAnswer:
    choice: str | None  # SCALE_OUT, SCALE_UP, EITHER, or None: no answer (and the line says why)
    line: str


def boxes_label(boxes: int, per_box: str, gpu_model: str | None) -> str:
    """"4 boxes of 1x RTX 4080", "1 box of 4x RTX 4080"; on a CPU study "2 boxes of cpu"."""
    model = f" {gpu_model}" if gpu_model and gpu_model != "none" and not per_box.startswith("cpu") else ""
    return f"{boxes} box{'es' if boxes != 1 else ''} of {per_box}{model}"


FAILED_TEXT = 160  # a failure's reason is cut to this many characters


def one_line(text: str, limit: int = FAILED_TEXT) -> str:
    """``text`` on one line: its first non-empty line, spaces collapsed, cut to ``limit``."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    line = " ".join(first.split())
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def run_failed(config: str, status: str | None, exit_code: int | None, error: str | None) -> str | None:
    """"1x*2 failed (why, on one line)" for a run that failed, lost a server (degraded) or was
    refused; None for one that ran to its end. A failed gate is a verdict on sound figures, not
    a failed run: its figures stand."""
    if status != "failed" or exit_code == GATE_FAILURE_EXIT_CODE:
        return None
    why = one_line(error or "") or f"exit code {exit_code}"
    return f"{config} failed ({why})"


def _figure_text(side: Side, figure: Figure, slo_name: str | None) -> str:
    if side.failed:
        return f"{side.label}: failed"
    if figure.throughput is None:
        return f"{side.label}: " + (f"no level meets {slo_name}" if slo_name else "no result")
    mark = f" ({UNSTABLE_MARK})" if figure.unstable else ""
    per = " per million tokens" if figure.tokens else "/1000"
    cost = f" at {fmt.money(figure.cost_per_1000)}{per}" if figure.cost_per_1000 is not None else " (no price)"
    return f"{side.label}: {fmt.rate(figure.throughput)} {'tokens' if figure.tokens else 'images'}/s{mark}{cost}"


def scale_answer(out: Side, up: Side, slo_name: str | None = None, tie: float = TIE, capped: str = "") -> ScaleAnswer:
    """``out``: the N one-GPU boxes; ``up``: the one N-GPU box; ``slo_name`` ("p99 <= 50 ms"):
    the study's latency target, whose point decides (None: the peak decides). A side that failed
    leaves it not decided; a side that ran fine and met no level loses. ``capped``: why neither
    side's GPUs were the limit (engine/analysis/request_path_cap.py), said instead of a choice;
    "" when they may have been."""
    a = out.slo if slo_name and out.slo is not None else out.peak
    b = up.slo if slo_name and up.slo is not None else up.peak
    basis = f"at {slo_name}" if slo_name else "at the peak"
    head = f"{basis}: {_figure_text(out, a, slo_name)}; {_figure_text(up, b, slo_name)}"
    failed = [s.failed for s in (out, up) if s.failed]
    if failed:  # a side that failed decides nothing: never "only the other meets it"
        return ScaleAnswer(None, f"{head} → not decided: {'; '.join(failed)}")
    if capped:
        return ScaleAnswer(None, f"{head} → no answer: {capped}")
    if a.throughput is None and b.throughput is None:
        return ScaleAnswer(None, f"{head} → no answer: neither meets {slo_name}" if slo_name
                           else f"{head} → no answer: neither has a result")
    if a.throughput is None or b.throughput is None:
        choice, winner = (SCALE_UP, up) if a.throughput is None else (SCALE_OUT, out)
        why = f"only {winner.label} meets {slo_name}" if slo_name else f"only {winner.label} has a result"
        return ScaleAnswer(choice, f"{head} → {choice} ({why})")
    if a.tokens != b.tokens:
        return ScaleAnswer(None, f"{head} → no answer: one side streams tokens, the other answers images")
    unpriced = [s for s, f in ((out, a), (up, b)) if f.cost_per_1000 is None]
    if unpriced:
        hints = "; ".join(f"{s.label}: {s.price_hint}" for s in unpriced)
        return ScaleAnswer(None, f"{head} → no cost answer: no price for {hints}")
    assert a.cost_per_1000 is not None and b.cost_per_1000 is not None
    cheaper, dearer = sorted((a.cost_per_1000, b.cost_per_1000))
    item = "token" if a.tokens else "image"
    if dearer <= 0 or (dearer - cheaper) / dearer <= tie:
        return ScaleAnswer(EITHER, f"{head} → either: the same cost per {item} within {tie * 100:g} %")
    ra, rb = a.cost_range(), b.cost_range()
    if ra is not None and rb is not None and ra[0] <= rb[1] and rb[0] <= ra[1]:
        gap = (dearer - cheaper) / dearer * 100
        return ScaleAnswer(EITHER, f"{head} → either: {gap:.1f} % apart in cost per {item}, inside the spread of "
                                   "their own windows (the two levels' windows overlap)")
    choice = SCALE_OUT if a.cost_per_1000 < b.cost_per_1000 else SCALE_UP
    return ScaleAnswer(choice, f"{head} → {choice}")
