"""The views, one widget and one `VIEWS` entry each: the app builds its modes, keys, footer,
help and command palette from `VIEWS` (docs/architecture.md, "A TUI view")."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal

from tui.screens.base import View
from tui.widgets.charts import GpuHistoryPanel, HostPartiesPanel, KneePanel, OverTimePanel
from tui.widgets.event_log import EventLogPanel
from tui.widgets.gpus import GpuPanel
from tui.widgets.notices import NoticesPanel
from tui.widgets.probe import (
    AllReducePanel,
    EfficiencyPanel,
    ProbePanel,
    TopologyPanel,
    TrainingBillPanel,
)
from tui.widgets.study import StudyView
from tui.widgets.sweep import SweepPanel, WindowsPanel
from tui.widgets.timeline import TimelinePanel
from tui.widgets.view import ViewBody


class LiveView(ViewBody):
    """Everything at a glance; panels drop out as the terminal gets small (see app.tcss)."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="live-top"):
            yield GpuPanel(id="gpus")
            yield TimelinePanel(id="timeline")
        yield SweepPanel(id="sweep")
        with Horizontal(id="live-bottom"):
            yield NoticesPanel(id="notices")
            yield EventLogPanel(tail_only=True, id="log")


class SweepView(ViewBody):
    def compose(self) -> ComposeResult:
        yield SweepPanel(id="sweep-full")
        yield WindowsPanel(id="windows")
        yield TimelinePanel(id="timeline-full")


class ProbeView(ViewBody):
    def compose(self) -> ComposeResult:
        yield TopologyPanel(id="topology")
        yield ProbePanel(id="probe")
        yield EfficiencyPanel(id="efficiency")
        yield TrainingBillPanel(id="bill")
        yield AllReducePanel(id="allreduce")


class ChartsView(ViewBody):
    """The knee and the windows over time side by side from 120 columns (stacked below), then
    each GPU's history and the host's CPU by party."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="charts-top"):
            yield KneePanel(id="knee")
            yield OverTimePanel(id="over-time")
        with Horizontal(id="charts-bottom"):
            yield GpuHistoryPanel(id="gpu-history")
            yield HostPartiesPanel(id="host-parties")


class LogView(ViewBody):
    def compose(self) -> ComposeResult:
        yield NoticesPanel(id="notices-full")
        yield EventLogPanel(id="log-full")


VIEWS: tuple[View, ...] = (
    View("live", "1", "Live", "live", "Everything at a glance", LiveView),
    View("sweep", "2", "Sweep", "sweep", "Levels, the current level's windows, charts over time", SweepView),
    View("probe", "3", "Probe", "training probe", "Probe results, scaling efficiency, training bill, all-reduce, topology", ProbeView),
    View("log", "4", "Log", "warnings and log", "Every warning once, and the event log", LogView),
    View("study", "5", "Study", "scaling study", "Every config's throughput curve, and the per-config table", StudyView,
         study_only=True),
    View("charts", "6", "Charts", "charts", "The knee, windows over time, each GPU's history, the host's CPU by party",
         ChartsView),
)
