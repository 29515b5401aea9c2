"""The four views: live dashboard, sweep detail, training probe, warnings and log."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal

from tui.screens.base import StateScreen
from tui.widgets.event_log import EventLogPanel
from tui.widgets.gpus import GpuPanel
from tui.widgets.notices import NoticesPanel
from tui.widgets.probe import AllReducePanel, EfficiencyPanel, ProbePanel, TopologyPanel
from tui.widgets.sweep import SweepPanel, WindowsPanel
from tui.widgets.timeline import TimelinePanel


class LiveScreen(StateScreen):
    """Everything at a glance; panels drop out as the terminal gets small (see app.tcss)."""

    VIEW = "live"
    SUB_TITLE = "live"

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="live-top"):
            yield GpuPanel(id="gpus")
            yield TimelinePanel(id="timeline")
        yield SweepPanel(id="sweep")
        with Horizontal(id="live-bottom"):
            yield NoticesPanel(id="notices")
            yield EventLogPanel(tail_only=True, id="log")


class SweepScreen(StateScreen):
    VIEW = "sweep"
    SUB_TITLE = "sweep"

    def compose_body(self) -> ComposeResult:
        yield SweepPanel(id="sweep-full")
        yield WindowsPanel(id="windows")
        yield TimelinePanel(id="timeline-full")


class ProbeScreen(StateScreen):
    VIEW = "probe"
    SUB_TITLE = "training probe"

    def compose_body(self) -> ComposeResult:
        yield TopologyPanel(id="topology")
        yield ProbePanel(id="probe")
        yield EfficiencyPanel(id="efficiency")
        yield AllReducePanel(id="allreduce")


class LogScreen(StateScreen):
    VIEW = "log"
    SUB_TITLE = "warnings and log"

    def compose_body(self) -> ComposeResult:
        yield NoticesPanel(id="notices-full")
        yield EventLogPanel(id="log-full")
