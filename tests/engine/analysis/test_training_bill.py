"""The training bill (pure): time and $ per epoch with the CI carried through a reciprocal, the
pricing of a world size, the stop rule for training, and the lines that ask for what is missing."""

from __future__ import annotations

import pytest

from engine import columns
from engine.analysis.training_bill import price_for, reciprocal_interval, training_bill
from engine.events import ProbeResult, StatSummary


def result(world: int, mean: float, half: float | None = None, strategy: str = "ddp", scaling: str = "weak",
           batch: int = 32, device: str = "cuda", **kw) -> ProbeResult:
    sps = StatSummary(mean=mean, ci_low=None if half is None else mean - half,
                      ci_high=None if half is None else mean + half, n=3)
    per_device = batch // world if scaling == "strong" else batch
    return ProbeResult(model="mlp", params=1, strategy="single" if world == 1 else strategy, scaling=scaling,
                       world_size=world, per_device_batch=per_device, global_batch=per_device * world, device=device,
                       backend="nccl", precision="bf16", samples_per_s=sps,
                       step_time_s=StatSummary(mean=0.01, ci_low=None, ci_high=None, n=3), **kw)


def test_the_ci_of_a_reciprocal_swaps_its_bounds() -> None:
    epoch = reciprocal_interval(1000.0, StatSummary(mean=100.0, ci_low=80.0, ci_high=125.0, n=3))
    assert epoch is not None
    # the short epoch comes from the high throughput: 1000/125 = 8 s, the long one from 1000/80
    assert (epoch.mean, epoch.low, epoch.high) == (10.0, 8.0, 12.5)
    assert epoch.low is not None and epoch.high is not None and epoch.low < epoch.mean < epoch.high


def test_a_throughput_bound_at_zero_leaves_the_epoch_unbounded_and_one_run_has_no_ci() -> None:
    wide = reciprocal_interval(1000.0, StatSummary(mean=100.0, ci_low=-20.0, ci_high=220.0, n=2))
    assert wide is not None and wide.high is None and wide.low == pytest.approx(1000 / 220)
    single = reciprocal_interval(1000.0, StatSummary(mean=100.0, ci_low=None, ci_high=None, n=1))
    assert single is not None and (single.mean, single.low, single.high) == (10.0, None, None)
    assert reciprocal_interval(1000.0, StatSummary(mean=0.0, ci_low=None, ci_high=None, n=1)) is None


def test_a_world_size_pays_its_share_of_the_box_and_whole_boxes_past_it() -> None:
    assert price_for(1, 12.0, 4) == 3.0 and price_for(4, 12.0, 4) == 12.0
    assert price_for(6, 12.0, 4) == 24.0  # two boxes
    assert price_for(2, 12.0, 0) == 12.0  # the box's GPU count unknown: the box


def test_time_and_dollars_per_epoch_carry_the_ci_per_world_size() -> None:
    results = [result(1, 1000.0, 50.0), result(2, 1900.0, 100.0), result(4, 3600.0, 200.0)]
    bill = training_bill(results, dataset_size=1_000_000, cost_per_hour=12.0, box_gpus=4)
    assert [r.result.world_size for r in bill.rows] == [1, 2, 4]
    two = bill.rows[1]
    assert two.epoch_s is not None and two.cost is not None
    assert two.epoch_s.mean == pytest.approx(1_000_000 / 1900)
    assert (two.epoch_s.low, two.epoch_s.high) == (pytest.approx(1_000_000 / 2000), pytest.approx(1_000_000 / 1800))
    assert two.price_per_hour == 6.0
    assert two.cost.mean == pytest.approx(1_000_000 / 1900 * 6 / 3600)
    assert (two.cost.low, two.cost.high) == (pytest.approx(1_000_000 / 2000 * 6 / 3600),
                                             pytest.approx(1_000_000 / 1800 * 6 / 3600))
    assert bill.missing is None and bill.pricing == "priced at $12/hr for the box of 4 GPUs: $3.00/hr per GPU, pro rata"
    cells = columns.cells(columns.bill_columns(bill), two)
    assert (cells["epoch"], cells["epoch_ci"], cells["cost"], cells["cost_ci"]) == (
        "8m46s", "8m20s-9m16s", "$0.877", "$0.833-$0.926")


def test_stop_where_an_added_gpu_gives_less_than_half_a_gpu() -> None:
    # 1 -> 2 adds 900/s (90 % of one GPU), 2 -> 4 adds 300/s per GPU (30 %): stop at 2
    results = [result(1, 1000.0, 10.0), result(2, 1900.0, 10.0), result(4, 2500.0, 10.0)]
    (stop,) = training_bill(results, 100_000, 8.0, box_gpus=4).stops
    assert stop.label == "mlp ddp weak b32"
    assert (stop.stop.variant, stop.stop.units) == ("2x", 2)
    assert stop.stop.reason.startswith("stop at 2 GPUs: going to 4x adds +300 samples/s per added GPU "
                                       "(mean samples/s), 30 % of what one GPU gives in 1x (below 50 %)")
    assert "$/epoch goes from" in stop.stop.reason


def test_every_step_that_pays_reaches_the_largest_world_size() -> None:
    results = [result(1, 1000.0), result(2, 1900.0), result(4, 3700.0)]
    (stop,) = training_bill(results, None, None).stops
    assert stop.stop.units == 4 and "with no limit found" in stop.stop.reason and "$/epoch" not in stop.stop.reason


def test_each_strategy_is_judged_against_the_shared_single_device_run() -> None:
    results = [result(1, 1000.0), result(2, 1900.0, strategy="ddp"), result(2, 1200.0, strategy="fsdp")]
    bill = training_bill(results, 10_000, 1.0, box_gpus=2)
    assert len(bill.rows) == 3  # the one-device run once
    ddp, fsdp = bill.stops
    assert (ddp.label, ddp.stop.units) == ("mlp ddp weak b32", 2)
    assert (fsdp.label, fsdp.stop.units) == ("mlp fsdp weak b32", 1)


def test_a_torchrun_run_takes_its_single_device_figures_from_the_baseline() -> None:
    base = StatSummary(mean=1000.0, ci_low=990.0, ci_high=1010.0, n=3)
    (multi,) = [result(2, 1100.0, 10.0, baseline_samples_per_s=base, baseline_step_time_s=0.032)]
    bill = training_bill([multi], 10_000, 2.0, box_gpus=2)
    assert [(r.result.world_size, r.result.samples_per_s.mean) for r in bill.rows] == [(1, 1000.0), (2, 1100.0)]
    assert bill.stops[0].stop.units == 1  # +100/s for the added GPU: 10 % of one


def test_on_cpu_the_unit_is_a_rank_and_the_box_pays_at_every_size() -> None:
    results = [result(1, 100.0, device="cpu"), result(2, 190.0, device="cpu")]
    bill = training_bill(results, 1000, 0.5)
    assert bill.pricing == "priced at $0.5/hr, the whole box at every world size"
    assert all(r.price_per_hour == 0.5 for r in bill.rows)
    assert bill.stops[0].stop.reason.startswith("stop at 2 ranks")


@pytest.mark.parametrize("dataset, price, line", [
    (None, None, "set probe.dataset_size (samples per epoch) and hardware.cost_per_hour for the time and $ per epoch"),
    (None, 3.0, "set probe.dataset_size (samples per epoch) for the time and $ per epoch"),
    (5000, 0.0, "set hardware.cost_per_hour for the $ per epoch"),
])
def test_what_is_missing_is_asked_for_in_one_line(dataset, price, line) -> None:
    bill = training_bill([result(1, 1000.0), result(2, 1900.0)], dataset, price, box_gpus=2)
    assert bill.missing == line
    assert bill.has_epochs == (dataset is not None) and not bill.has_cost
    assert [c.key for c in columns.bill_columns(bill)][-2:] == ["epoch", "epoch_ci"]
    assert len(bill.stops) == 1  # the stop rule needs neither
    flags = training_bill([result(1, 1000.0)], None, None, keys=("--dataset-size", "--cost-per-hour")).missing
    assert flags is not None and flags.startswith("set --dataset-size (samples per epoch) and --cost-per-hour")


def test_no_results_no_bill() -> None:
    bill = training_bill([], 1000, 1.0)
    assert bill.rows == [] and bill.stops == [] and bill.missing is None and bill.pricing is None


def test_a_world_size_whose_repeats_disagree_decides_no_stop() -> None:
    # 4 GPUs' mean says linear scaling, but its repeats span ±50 %: not decided there, never a stop drawn from it
    results = [result(1, 1000.0, 20.0), result(2, 1900.0, 40.0), result(4, 3800.0, 1900.0)]
    (stop,) = training_bill(results, None, None).stops
    assert stop.stop.units == 2
    assert "4x not decided (world size 4: its repeats disagree (95 % CI ±50 % of the mean, over 20 %)" in stop.stop.reason
    (alone,) = training_bill([result(1, 1000.0, 600.0)], None, None).stops
    assert alone.stop.variant is None and alone.stop.reason.startswith("not decided: 1x: world size 1: its repeats disagree")
