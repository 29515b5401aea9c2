"""Predict, then check: a larger config's peak throughput from the smaller configs of its arm
(scale up: one server over N GPUs; scale out: N one-GPU servers), with an interval carried from
the measured spread, and the measured figure beside it where the study also ran that config.

The law: the Universal Scalability Law X(N) = λN / (1 + σ(N-1) + κN(N-1)); Amdahl's law is
κ = 0, linear scaling σ = κ = 0. Written as N/X = a + b(N-1) + cN(N-1) (a = 1/λ, b = σ/λ,
c = κ/λ) it is a weighted linear least-squares fit: each point weighs by its measured spread
carried to N/X (sd(N/X) = N sd(X) / X²), and σ, κ stay >= 0 (a coefficient that would go
negative is held at 0, which makes the fit the simpler law).

The interval: Z95 standard deviations of N/X at the target, from the coefficients' covariance
(widened by the residuals where they scatter more than the measured spread says), mapped back to
throughput. Without a measured spread at every point there is no interval, never a zero one.

The choice of law:
- one unit count: nothing to fit;
- two unit counts: the USL is under-determined (three coefficients) and Amdahl's law goes through
  both points: linear, unless the larger count departs from it by more than Z95 standard
  deviations of the measured spread (then Amdahl);
- three or more: the law with the least leave-one-out error (each point predicted from the
  others), among the laws those fits still determine (Amdahl needs 3 unit counts, the USL 4);
  on a tie the simpler law.

Pure: points in (unit count, throughput, spread), forecasts and lines out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from engine import format as fmt

LINEAR, AMDAHL, USL = "linear", "Amdahl", "USL"
LAWS = (LINEAR, AMDAHL, USL)  # simplest first
_TERMS = {LINEAR: 1, AMDAHL: 2, USL: 3}
Z95 = 1.959964  # two-sided 95 % of a normal distribution
_ROUNDING = 1e-9  # leave-one-out errors closer than this are a tie (float rounding, not a difference)
TARGETS = (4, 8)  # the unit counts always predicted, beside any larger config the study ran
SCALE_UP, SCALE_OUT = "scale up", "scale out"


@dataclass(frozen=True)
class Point:
    """One config's peak: a sound level of a config that ran to the end."""

    config: str  # "2x", "1x*2"
    units: int  # GPUs
    rate: float  # items/s at its peak
    spread: float | None  # standard deviation of its peak level's windows' rates; None: not measured


@dataclass(frozen=True)
class Fit:
    law: str
    coef: tuple[float, float, float]  # a, b, c of N/X = a + b(N-1) + cN(N-1)
    cov: tuple[tuple[float, float, float], ...] | None  # of coef; None: no measured spread at some point
    chi2: float
    dof: int

    @property
    def lam(self) -> float:
        return 1.0 / self.coef[0]

    @property
    def sigma(self) -> float:
        return self.coef[1] / self.coef[0]

    @property
    def kappa(self) -> float:
        return self.coef[2] / self.coef[0]

    def rate(self, n: float) -> float:
        return n / float(np.dot(_row(n), self.coef))

    def interval(self, n: float) -> tuple[float, float | None] | None:
        """(low, high) of the rate at ``n``; high None: not bounded above; None: no measured spread."""
        if self.cov is None:
            return None
        g = np.array(_row(n))
        d = float(g @ np.array(self.coef))
        half = Z95 * math.sqrt(max(0.0, float(g @ np.array(self.cov) @ g)))
        return n / (d + half), (n / (d - half) if d - half > 0 else None)

    @property
    def words(self) -> str:
        """"Amdahl σ 0.113", "USL σ 0.050 κ 0.0200", "linear"."""
        if self.law == LINEAR:
            return LINEAR
        if self.law == AMDAHL:
            return f"Amdahl σ {self.sigma:.3g}"
        return f"USL σ {self.sigma:.3g} κ {self.kappa:.3g}"


def _row(n: float) -> tuple[float, float, float]:
    return 1.0, n - 1.0, n * (n - 1.0)


def measured_spread(points: Sequence[Point]) -> bool:
    return all(p.spread is not None and p.spread > 0 for p in points)


def fit(points: Sequence[Point], law: str) -> Fit | None:
    """The law fitted to the points; None when they do not determine it (fewer unit counts than
    coefficients)."""
    terms = _TERMS[law]
    if len({p.units for p in points}) < terms:
        return None
    n = np.array([float(p.units) for p in points])
    x = np.array([p.rate for p in points])
    y = n / x
    spread = measured_spread(points)
    # without a measured spread everywhere: equal relative weights, and no interval
    sd = n * np.array([p.spread or 0.0 for p in points]) / x**2 if spread else y
    w = 1.0 / sd**2
    design = np.column_stack([np.ones_like(n), n - 1.0, n * (n - 1.0)])
    best: tuple[float, list[int], np.ndarray, np.ndarray] | None = None
    # σ, κ >= 0: the least squares over each set of free coefficients, the best one within bounds
    for k in range(terms - 1, -1, -1):
        for extra in combinations(range(1, terms), k):
            cols = [0, *extra]
            a = design[:, cols]
            m = a.T @ (w[:, None] * a)
            if np.linalg.matrix_rank(m) < len(cols):
                continue
            theta = np.linalg.solve(m, a.T @ (w * y))
            if theta[0] <= 0 or any(theta[1:] < 0):
                continue
            chi2 = float(np.sum(w * (y - a @ theta) ** 2))
            if best is None or chi2 < best[0] - _ROUNDING * max(1.0, best[0]):
                best = (chi2, cols, theta, np.linalg.inv(m))
    assert best is not None  # a alone always fits: the weighted mean of N/X, which is > 0
    chi2, cols, theta, inv = best
    dof = len(points) - len(cols)
    coef = [0.0, 0.0, 0.0]
    for i, c in enumerate(cols):
        coef[c] = float(theta[i])
    cov = None
    if spread:
        scale = max(1.0, chi2 / dof) if dof > 0 else 1.0  # residuals beyond the spread widen it
        full = np.zeros((3, 3))
        full[np.ix_(cols, cols)] = inv * scale
        cov = tuple((float(r[0]), float(r[1]), float(r[2])) for r in full)
    return Fit(law, (coef[0], coef[1], coef[2]), cov, chi2, dof)


def loo_error(points: Sequence[Point], law: str) -> float | None:
    """The root mean square of each point's relative error when predicted from the others; None
    when some of those fits are under-determined."""
    errors = []
    for i, p in enumerate(points):
        f = fit([q for j, q in enumerate(points) if j != i], law)
        if f is None:
            return None
        errors.append((f.rate(p.units) - p.rate) / p.rate)
    return math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else None


@dataclass(frozen=True)
class Choice:
    fit: Fit
    why: str  # why this law, in words
    loo: tuple[tuple[str, float], ...] = ()  # (law, leave-one-out error) where it was computed


def _two_counts(points: Sequence[Point]) -> Choice:
    linear, amdahl = fit(points, LINEAR), fit(points, AMDAHL)
    assert linear is not None and amdahl is not None
    big = max(points, key=lambda p: p.units)
    under = "2 unit counts leave the USL under-determined"
    if amdahl.sigma <= 0:
        return Choice(linear, f"{big.config} is at or above linear, so Amdahl's σ is 0; {under}")
    if linear.cov is not None and linear.chi2 <= Z95**2:
        return Choice(linear, f"{big.config} is within {Z95:.2f} measured sd of linear; {under}")
    if linear.cov is not None:
        return Choice(amdahl, f"{big.config} falls below linear by more than {Z95:.2f} measured sd; {under}")
    return Choice(amdahl, f"no spread measured to hold {big.config} to linear, so Amdahl through both points; {under}")


def choose(points: Sequence[Point]) -> Choice | str:
    """The law for these points, or why none (one unit count)."""
    counts = sorted({p.units for p in points})
    if len(counts) < 2:
        return f"only {', '.join(p.config for p in points) or 'no config'} measured: one unit count, nothing to fit"
    if len(counts) == 2:
        return _two_counts(points)
    scores = [(law, s) for law in LAWS if (s := loo_error(points, law)) is not None]
    law, score = scores[0]
    for other, s in scores[1:]:
        if s < score - _ROUNDING:  # more coefficients must predict the left-out points better
            law, score = other, s
    chosen = fit(points, law)
    assert chosen is not None
    tail = [f"{o} {s * 100:.1f} %" for o, s in scores if o != law]
    if all(o != USL for o, _s in scores):
        tail.append(f"the USL needs {_TERMS[USL] + 1} unit counts")
    return Choice(chosen, f"the least leave-one-out error, {score * 100:.1f} % ({'; '.join(tail)})", tuple(scores))


@dataclass(frozen=True)
class ArmConfig:
    """A config of one arm in the study: its point, or why it gives none."""

    config: str
    units: int
    point: Point | None
    why_not: str = ""  # "2x has no sound level", "2x failed", "1x*4 shared 2 GPUs"


@dataclass(frozen=True)
class Forecast:
    arm: str  # SCALE_UP or SCALE_OUT
    config: str  # the config predicted: "4x", "1x*4"
    units: int
    items: str  # "images" or "tokens"
    basis: tuple[Point, ...]  # the points it was predicted from
    left_out: tuple[str, ...]  # smaller configs that gave no point, and why
    choice: Choice | None  # None: no forecast
    why_not: str  # "" or why no forecast
    measured: ArmConfig | None  # the config as the study ran it; None: it did not

    @property
    def predicted(self) -> float | None:
        return self.choice.fit.rate(self.units) if self.choice is not None else None

    @property
    def interval(self) -> tuple[float, float | None] | None:
        return self.choice.fit.interval(self.units) if self.choice is not None else None

    @property
    def check(self) -> str:
        """"inside", "above", "below" the interval; "" when there is nothing to check."""
        band = self.interval
        got = self.measured.point if self.measured is not None else None
        if band is None or got is None:
            return ""
        low, high = band
        return "below" if got.rate < low else "above" if high is not None and got.rate > high else "inside"

    @property
    def interval_words(self) -> str:
        band = self.interval
        if band is None:
            unmeasured = [p.config for p in self.basis if not p.spread]
            return f"no interval: no spread measured at {', '.join(unmeasured)}"
        low, high = band
        return f"{fmt.rate(low)}–{fmt.rate(high)}, 95 %" if high is not None else f"{fmt.rate(low)} or more, 95 %"

    @property
    def line(self) -> str:
        head = f"forecast, {self.arm} {self.config}"
        if self.choice is None:
            return f"{head}: no forecast: {self.why_not}"
        predicted = self.predicted
        basis = ", ".join(p.config for p in self.basis)
        left = f" ({'; '.join(self.left_out)}: left out)" if self.left_out else ""
        text = (f"{head}: predicted {fmt.rate(predicted)} {self.items}/s at the peak ({self.interval_words}) "
                f"from {basis}{left}; {self._measured_words()}")
        return f"{text}; law: {self.choice.fit.words}: {self.choice.why}"

    def _measured_words(self) -> str:
        m = self.measured
        if m is None:
            return "not measured in this study"
        if m.point is None:
            return f"no measured figure to check: {m.why_not}"
        check = self.check
        if not check:
            predicted = self.predicted
            assert predicted is not None
            return f"measured {fmt.rate(m.point.rate)} ({(m.point.rate / predicted - 1) * 100:+.1f} %; no interval)"
        return f"measured {fmt.rate(m.point.rate)}: {check}"


def _name(arm: str, units: int, served: bool = False) -> str:
    """The config of ``units`` on an arm: Triton's 4x / 1x*4, a served LLM's tp4 / 1*4 (study --serve)."""
    if served:
        return f"1*{units}" if arm == SCALE_OUT else f"tp{units}"
    return f"1x*{units}" if arm == SCALE_OUT else f"{units}x"


def forecast_arm(arm: str, configs: Sequence[ArmConfig], items: str = "images",
                 targets: Sequence[int] = TARGETS) -> list[Forecast]:
    """Each target unit count (``targets`` and any larger config the arm ran) predicted from the
    arm's configs of fewer units."""
    wanted = sorted({*targets, *(c.units for c in configs if c.units > 2)})
    served = any(c.config.startswith(("tp", "1*")) for c in configs)
    out = []
    for n in wanted:
        smaller = [c for c in configs if c.units < n]
        basis = tuple(c.point for c in smaller if c.point is not None)
        left = tuple(c.why_not for c in smaller if c.point is None)
        measured = next((c for c in configs if c.units == n), None)
        config = measured.config if measured is not None else _name(arm, n, served)
        choice = choose(basis) if basis else "no smaller config measured"
        if isinstance(choice, str) and basis and not left and not any(c.units == 2 for c in configs):
            choice += f" (add {_name(arm, 2, served)} to --variants)"
        if isinstance(choice, str):
            why = "; ".join((*left, choice)) if left else choice
            out.append(Forecast(arm, config, n, items, basis, left, None, why, measured))
        else:
            out.append(Forecast(arm, config, n, items, basis, left, choice, "", measured))
    return out


def arm_lines(forecasts: Sequence[Forecast]) -> list[str]:
    """One line per forecast; an arm whose every target has no forecast for the same reason says
    it once."""
    lines = []
    for arm in (SCALE_UP, SCALE_OUT):
        mine = [f for f in forecasts if f.arm == arm]
        reasons = {f.why_not for f in mine}
        if mine and all(f.choice is None for f in mine) and len(reasons) == 1:
            lines.append(f"forecast, {arm}: no forecast: {reasons.pop()}")
        else:
            lines += [f.line for f in mine]
    return lines
