"""The one rule for figures that add up (engine/analysis/summed.py): each result type's declared
additive fields summed, an optional share None where no part has it, and the latency, audit and
errors by kind merged by their own rules."""

from __future__ import annotations

import numpy as np
import pytest

from engine.analysis.percentiles import latency_stats
from engine.analysis.summed import summed
from engine.events import ClientAudit, EndpointResult, LevelResult, WindowResult


def _endpoint(samples_ns: np.ndarray, rate: float | None, errors: dict[str, int]) -> EndpointResult:
    return EndpointResult(name="ep1", url="http://a", connections=4, target_rate=rate, requests=samples_ns.size,
                          errors=sum(errors.values()), throughput_rps=samples_ns.size / 2.0,
                          throughput_ips=samples_ns.size, latency=latency_stats(samples_ns, histogram=True),
                          errors_by_kind=errors)


def test_declared_fields_add_and_the_latency_covers_every_part() -> None:
    a, b = np.arange(1, 101, dtype=np.int64) * 1_000_000, np.arange(1, 301, dtype=np.int64) * 2_000_000
    figures = summed([_endpoint(a, 10.0, {"timeout": 2}), _endpoint(b, 30.0, {"timeout": 1, "rejected": 4})])
    assert set(figures) == {*EndpointResult.ADDITIVE, "latency", "errors_by_kind"}  # no audit: the type has none
    assert (figures["requests"], figures["errors"], figures["connections"]) == (400, 7, 8)
    assert (figures["throughput_rps"], figures["throughput_ips"], figures["target_rate"]) == (200.0, 400.0, 40.0)
    assert figures["errors_by_kind"] == {"timeout": 3, "rejected": 4}
    assert figures["latency"].count == 400
    assert figures["latency"].mean == pytest.approx(np.concatenate([a, b]).mean() / 1e9)
    assert figures["latency"].max == b[-1] / 1e9


def test_an_optional_share_no_part_has_stays_not_available() -> None:
    samples = np.full(10, 1_000_000, dtype=np.int64)
    figures = summed([_endpoint(samples, None, {}), _endpoint(samples, None, {})])
    assert figures["target_rate"] is None


def test_the_audits_merge_naming_each_part() -> None:
    samples = np.full(10, 1_000_000, dtype=np.int64)
    windows = [WindowResult(level=4.0, index=1, warmup=False, t_start=0.0, t_end=1.0, requests=10, errors=0,
                            throughput_rps=10.0, throughput_ips=10.0, latency=latency_stats(samples, histogram=True),
                            audit=ClientAudit(sent=10, client_bound=bound, reasons=["busy"] if bound else []))
               for bound in (False, True)]
    figures = summed(windows, ["a", "b"])
    assert figures["audit"].sent == 20 and figures["audit"].client_bound
    assert figures["audit"].reasons == ["host b: busy"]
    assert figures["stream"] is None  # unary windows
    assert "target_rate" in LevelResult.ADDITIVE and "target_rate" not in WindowResult.ADDITIVE
