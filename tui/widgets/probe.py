"""Training probe results, scaling efficiency, all-reduce bandwidth and the GPU topology."""

from __future__ import annotations

from collections import OrderedDict

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from engine import columns
from engine import events as ev
from engine import format as fmt
from engine.columns import Column
from tui import glyphs, tables
from tui.state import SessionState
from tui.widgets.panel import Panel


class ProbePanel(Panel):
    SECTIONS = ("probe",)
    TITLE = "training probe"
    STICKY_HEAD = True

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        if not state.probe:
            return Text(no_probe_text(replay=getattr(self.app, "replay", None) is not None), style="dim")
        return tables.probe_table(state.probe, width)

    def title_for(self, state: SessionState) -> str | None:
        if not state.probe:
            return self.TITLE
        first = state.probe[0]
        return f"training probe · {fmt.plural(len(state.probe), 'result')} · {first.backend} on {first.device}, {first.precision}"


def no_probe_text(replay: bool) -> str:
    """A replay cannot run the probe: `p` is a live session's key."""
    return "no probe result in the recording so far" if replay else "no probe result yet (p runs the probe)"


def efficiency_bars(results: list[ev.ProbeResult], width: int) -> Text:
    """Scaling efficiency per configuration and world size, as bars against 100 %."""
    groups: OrderedDict[str, list[ev.ProbeResult]] = OrderedDict()
    for r in results:
        if r.world_size > 1:
            key = f"{r.model} {r.strategy} {r.scaling} b{r.per_device_batch}"
            groups.setdefault(key, []).append(r)
    if not groups:
        return Text("needs results at 2 or more GPUs", style="dim")
    label_w = min(32, max(len(k) for k in groups) + 5)
    bar_w = max(10, width - label_w - 8)
    lines = []
    for key, rows in groups.items():
        for r in sorted(rows, key=lambda x: x.world_size):
            eff = r.efficiency
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(f"{key + f' x{r.world_size}':<{label_w}}", style="dim")
            style = "dim" if eff is None else "green" if eff >= 0.9 else "yellow" if eff >= 0.7 else "red"
            line.append(glyphs.bar(eff, bar_w), style=style)
            line.append(f" {fmt.percent(eff):>5}")
            lines.append(line)
    return Text("\n").join(lines)


class EfficiencyPanel(Panel):
    SECTIONS = ("probe",)
    TITLE = "scaling efficiency (throughput_N / (N x throughput_1))"

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        return efficiency_bars(state.probe, width)


def bill_body(state: SessionState, width: int) -> RenderableType:
    """The training bill's table (where the profile has a dataset size), then its notes: how it
    is priced, what to set for what is missing, and where to stop per configuration."""
    if not state.probe:
        return Text("no probe result yet", style="dim")
    bill = state.training_bill()
    parts: list[RenderableType] = []
    if bill.has_epochs:
        parts.append(tables.fitted_table(columns.bill_columns(bill), bill.rows, width))
    if bill.pricing:
        parts.append(Text(bill.pricing, style="dim", no_wrap=False))
    if bill.missing:
        parts.append(Text(bill.missing, style="yellow", no_wrap=False))
    for s in bill.stops:  # a reason is a sentence: it wraps, where a table row is cut
        line = Text(f"{s.label}: ", style="bold", no_wrap=False, overflow="fold")
        line.append(s.stop.reason, style="")
        parts.append(line)
    return Group(*parts)


class TrainingBillPanel(Panel):
    SECTIONS = ("probe", "session")
    TITLE = "training bill (time and $ per epoch, 95 % CI)"
    STICKY_HEAD = True

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        return bill_body(state, width)


class AllReducePanel(Panel):
    SECTIONS = ("probe",)
    TITLE = "all-reduce bandwidth"

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        if not state.allreduce:
            return Text("no all-reduce result yet", style="dim")
        latest: dict[int, ev.AllReduceResult] = {}
        for result in state.allreduce:  # a re-run replaces the older table of that size
            latest[result.world_size] = result
        parts: list[RenderableType] = []
        for result in latest.values():
            parts.append(Text(columns.allreduce_title(result), style="bold"))
            parts.append(tables.allreduce_table(result, width))
        return Group(*parts)


def topology_table(topology: ev.Topology) -> Table | None:
    """The GPU-to-GPU matrix as nvidia-smi topo -m shows it: NV#, PIX, PXB, PHB, NODE, SYS."""
    uuids = [str(g.get("uuid")) for g in topology.gpus]
    if not topology.links or len(uuids) < 2:
        return None
    label = {str(g.get("uuid")): f"GPU{g.get('index', i)}" for i, g in enumerate(topology.gpus)}
    cell: dict[tuple[str, str], str] = {}
    for link in topology.links:
        text = f"NV{link.nvlink_count}" if link.nvlink_count else (link.common_ancestor or "?")
        cell[(link.a, link.b)] = cell[(link.b, link.a)] = text
    layout: list[Column[object]] = [Column("gpu", "", str, 6, "left"), *(Column(u, label[u], str, 5) for u in uuids)]
    table = tables.make_table(layout)  # the cells are filled in below
    for a in uuids:
        table.add_row(label[a], *("X" if a == b else cell.get((a, b), fmt.NA) for b in uuids))
    return table


class TopologyPanel(Panel):
    SECTIONS = ("probe",)
    TITLE = "topology"

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        check = box_check_lines(state.box_check)
        if state.topology is None:
            return Text("no topology yet", style="dim") if check is None else check
        summary = Text(state.topology.summary or f"{len(state.topology.gpus)} GPUs")
        matrix = topology_table(state.topology)
        parts = [summary] if matrix is None else [summary, matrix]
        return Group(*parts, *([check] if check is not None else []))


CHECK_STYLE = {"no-go": "bold red", "warn": "yellow", "go": "green", "fail": "red"}


def box_check_lines(check: ev.BoxCheck | None, most: int = 6) -> Text | None:
    """The box check's go/no-go line and its worst items (fails first)."""
    if check is None:
        return None
    label = f"box check ({check.reused})" if check.reused else "box check"
    text = Text(f"{label}: {check.summary}", style=CHECK_STYLE.get(check.verdict, ""))
    bad = sorted((i for i in check.items if i.status in ("fail", "warn")), key=lambda i: i.status != "fail")
    for i in bad[:most]:
        expected = f" (expected {i.expected})" if i.expected else ""
        text.append(f"\n  {i.status:4} {i.scope} {i.name}: {i.measured}{expected}", style=CHECK_STYLE.get(i.status, ""))
    return text
