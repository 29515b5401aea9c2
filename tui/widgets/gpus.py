"""Per-GPU utilisation, memory and power: one compact row per GPU, plus the host."""

from __future__ import annotations

import re
import textwrap

from rich.console import RenderableType
from rich.text import Text

from engine import format as fmt
from tui import glyphs
from tui.state import GpuTrack, HostTrack, SessionState
from tui.widgets.panel import Panel

_VENDOR = re.compile(r"\b(NVIDIA|GeForce|Tesla)\b\s*", re.IGNORECASE)
DETAIL_MAX_GPUS = 7  # with 8 or more GPUs every GPU gets exactly one row
DETAIL_MIN_HEIGHT = 50  # terminal rows needed before a GPU gets its second (detail) row


def short_name(name: str | None) -> str:
    """"NVIDIA GeForce RTX 4080" -> "RTX 4080": the vendor words are the same on every row."""
    if not name:
        return "GPU"
    return _VENDOR.sub("", name).strip() or name


def _util_style(value: float | None) -> str:
    if value is None:
        return "dim"
    return "green" if value >= 80 else "yellow" if value >= 30 else "red"


def _widths(width: int) -> tuple[int, int, int]:
    """Chart widths for (utilisation, memory, power) from what the fixed text leaves."""
    fixed = 3 + 11 + (5 + 5) + (5 + 12) + (5 + 6)  # index, name, labels + values
    spare = max(9, width - fixed)
    each = max(3, min(40, spare // 3))
    return each, each, each


def gpu_row(track: GpuTrack, width: int) -> Text:
    r = track.latest
    # several servers' GPUs: "ep1:0" (engine/telemetry/triton_metrics.py)
    label = r.label or (f"{r.index}" if r.index is not None else track.uuid[-2:])
    util_w, mem_w, pwr_w = _widths(width - max(0, len(label) - 2))
    row = Text(no_wrap=True, overflow="ellipsis")
    row.append(f"{label:>2} ", style="bold")
    row.append(f"{short_name(r.name)[:10]:<10} ")
    row.append("util ", style="dim")
    row.append(glyphs.spark(track.util, util_w, 0.0, 100.0), style=_util_style(r.util_gpu))
    row.append(f" {fmt.percent_points(r.util_gpu):>4} ")
    row.append("mem ", style="dim")
    frac = track.mem_fraction[-1] if track.mem_fraction else None
    row.append(glyphs.bar(frac, mem_w), style="magenta")
    row.append(f" {fmt.gib(r.mem_used, 1):>5}/{fmt.gib(r.mem_total, 0)}G ")
    row.append("pwr ", style="dim")
    limit = r.power_limit_w or max((p for p in track.power if p is not None), default=None)
    row.append(glyphs.spark(track.power, pwr_w, 0.0, limit), style="cyan")
    row.append(f" {fmt.watts(r.power_w):>5}")
    return row


def gpu_detail(track: GpuTrack) -> Text:
    """The second row a GPU gets when there is room: temperature, clocks, links, processes."""
    r = track.latest
    parts = []
    if r.temp_c is not None:
        parts.append(f"{r.temp_c:.0f}°C")
    if r.sm_clock_mhz is not None:
        parts.append(f"SM {r.sm_clock_mhz:.0f} MHz")
    if r.power_limit_w is not None:
        parts.append(f"limit {r.power_limit_w:.0f}W")
    if r.pcie_gen is not None:
        parts.append(f"PCIe Gen{r.pcie_gen} x{r.pcie_width or '?'}")
    if r.pcie_tx_bps is not None or r.pcie_rx_bps is not None:
        parts.append(f"tx {fmt.gib(r.pcie_tx_bps, 2)} rx {fmt.gib(r.pcie_rx_bps, 2)} GiB/s")
    if r.nvlink_tx_bps is not None:
        parts.append(f"NVLink tx {fmt.gib(r.nvlink_tx_bps, 1)} GiB/s")
    if r.processes:
        parts.append(f"{len(r.processes)} proc")
    return Text("   " + " · ".join(parts) if parts else "", style="dim", no_wrap=True, overflow="ellipsis")


def host_row(state: SessionState, host: HostTrack, width: int) -> Text:
    h = host.latest
    spark_w = max(3, min(40, (width - 50) // 2))
    row = Text(no_wrap=True, overflow="ellipsis")
    row.append("host ", style="bold")
    row.append("cpu ", style="dim")
    row.append(glyphs.spark(host.cpu, spark_w, 0.0, 100.0), style="green")
    row.append(f" {fmt.percent_points(h.cpu_percent):>4} ")
    # "ours" as a share of the machine, on the host bar's 0-100 scale (an auto-scaled chart drew
    # 1 % as full bars beside it)
    row.append("ours ", style="dim")
    row.append(glyphs.spark([state.own_cpu_of_host(v) for v in host.own_cpu], spark_w, 0.0, 100.0), style="yellow")
    row.append(f" {fmt.percent_points(state.own_cpu_of_host(h.own_cpu_percent)):>4} ")
    if h.mem_total:
        row.append("mem ", style="dim")
        row.append(f"{fmt.gib(h.mem_used, 1)}/{fmt.gib(h.mem_total, 0)}G")
    return row


# the sampler's warnings (engine/telemetry) that say a GPU source will bring nothing this run
NVML_NONE = ("nvml-missing", "nvml-unavailable", "nvml-no-gpu")
METRICS_NONE = "triton-metrics-no-gpu"  # the server's /metrics has no GPU gauges (a key per server)
METRICS_UNREACHABLE = "triton-metrics-unreachable"  # retried: GPU values may still come
_NA_SUFFIX = re.compile(r":\s*(local|remote) GPU values are n/a( until it answers)?$")


def _telemetry_reason(state: SessionState, *prefixes: str) -> str | None:
    """The first telemetry warning whose key starts with one of ``prefixes``, less its "values are
    n/a" tail (the panel says that in its own words)."""
    for key, notice in state.notices.items():
        if key.startswith(prefixes):
            return _NA_SUFFIX.sub("", notice.message)
    return None


def no_gpu_note(state: SessionState) -> str:
    """What the GPU panel says while it has no GPU: why none will come, once the sampler's
    warnings say so (NVML unavailable on this machine, no GPU series in the server's /metrics);
    else what it waits for."""
    remote = (state.server is not None and not state.server.embedded) or state.profile.server.kind == "remote"
    cpu_run = state.server is not None and state.server.config_variant == "cpu"
    metrics = bool(state.profile.server.metrics_url or state.profile.server.metrics_urls)
    if remote and not cpu_run and metrics:  # its GPUs come from its /metrics alone
        none = _telemetry_reason(state, METRICS_NONE)
        if none is not None:
            return f"no GPU telemetry: {none}"
        unreachable = _telemetry_reason(state, METRICS_UNREACHABLE)
        return ("waiting for GPU telemetry from the server's /metrics (server.metrics_url)"
                + (f": {unreachable}" if unreachable else ""))
    if remote and not cpu_run:  # its GPUs are on another machine: only its metrics URL shows them
        return "no GPU telemetry: the server is remote (set server.metrics_url, or --metrics-url, for its GPUs)"
    if cpu_run or state.gpu_count == 0:
        return "no GPU: the model runs on the CPU"
    # this machine's GPUs: NVML reads them, and the embedded server's /metrics only where NVML found some
    none = _telemetry_reason(state, *NVML_NONE) or _telemetry_reason(state, METRICS_NONE)
    return f"no GPU telemetry: {none}" if none is not None else "waiting for GPU telemetry"


def note_lines(state: SessionState, width: int) -> list[Text]:
    """The note, wrapped at words to ``width``: its reason is read whole, never cut."""
    return [Text(line, style="dim") for line in textwrap.wrap(no_gpu_note(state), max(20, width))]


def render_gpus(state: SessionState, width: int, detail: bool) -> Text:
    lines: list[Text] = []
    tracks = list(state.gpus.values())
    with_detail = detail and len(tracks) <= DETAIL_MAX_GPUS
    for track in tracks:
        lines.append(gpu_row(track, width))
        if with_detail:
            extra = gpu_detail(track)
            if extra.plain:
                lines.append(extra)
    if not tracks:
        lines.extend(note_lines(state, width))
    if state.host is not None:
        lines.append(host_row(state, state.host, width))
    return Text("\n").join(lines)


class GpuPanel(Panel):
    SECTIONS = ("gpus", "host", "session", "notices")  # notices: the sampler's word that no GPU will come
    TITLE = "GPUs"

    def render_state(self, state: SessionState, width: int) -> RenderableType:
        return render_gpus(state, width, detail=self.app.size.height >= DETAIL_MIN_HEIGHT)

    def title_for(self, state: SessionState) -> str | None:
        source = f" · {state.gpu_source}" if state.gpu_source else ""
        return f"GPUs ({len(state.gpus)}){source}" if state.gpus else "GPUs"
