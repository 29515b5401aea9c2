"""Plain-text tables of probe results (the CLI's summary; no Rich, no Textual).

The columns are engine/columns.py's PROBE and ALLREDUCE, the same the TUI, the headless log and
the reports show: seed 002's single -> multi layout, the 95 % CI, speedup and efficiency against
one device, communication share, memory per GPU, GPU utilisation, Welch's p and the step time.
"""

from __future__ import annotations

from engine import columns
from engine.analysis.training_bill import TrainingBill
from engine.events import AllReduceResult, ProbeResult


def _order(r: ProbeResult) -> tuple[str, str, int, int]:
    """Each configuration's world sizes together, 1 GPU first."""
    work = r.per_device_batch * r.world_size if r.scaling == "strong" else r.per_device_batch
    return (r.model, r.scaling, work, r.world_size)


def probe_table(results: list[ProbeResult]) -> str:
    if not results:
        return "(no training results)"
    return columns.column_table(columns.PROBE, sorted(results, key=_order))


def bill_text(bill: TrainingBill) -> str:
    """The training bill: its table where there is a dataset size, then its notes (pricing, what
    to set, where to stop)."""
    parts = ["training bill"]
    if bill.has_epochs:
        parts.append(columns.column_table(columns.bill_columns(bill), bill.rows))
    parts += columns.bill_notes(bill)
    return "\n".join(parts)


def allreduce_table(sweep: AllReduceResult) -> str:
    cols = columns.allreduce_columns(sweep)
    return columns.allreduce_title(sweep) + "\n" + columns.column_table(cols, columns.allreduce_items(sweep))
