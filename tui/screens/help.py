"""The help screen: keys, views, and what the numbers mean."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rich.markdown import Markdown
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.screens.base import View

HELP = """\
# gpuscale-tui

## Keys

| key | does |
|---|---|
{views}| `s` / `x` | start the concurrency sweep / stop it (live session) |
| `p` | run the training probe (live session) |
| `e` | export the recording (JSON, CSV, Markdown, HTML) |
| `o` | open a recording to replay |
| `space` | replay: play / pause; at the end, play again from the start |
| `←` `→` `home` | replay: seek 10 s back / forward / to the start (at max speed the replay pauses there) |
| `-` `+` | replay: slower / faster (up to max) |
| `[` `]` | replay: previous / next level (a level measured again: each of its trials) |
| `.` | replay: one event forward (paused) |
| `l` | the levels: `↑` `↓` choose one, and see its windows, latency percentiles, server time and GPU and host trace (live and replay) |
| `tab` `↑` `↓` `pgup` `pgdn` | move between panels and scroll them |
| `ctrl+p` | command palette: every action, themes |
| `q` | quit (a live session is stopped and its recording finalised) |
| `ctrl+c` | quit, interrupted (exit 130): during a run it asks as `q` does, and `ctrl+c` again stops at once |

## Numbers

* **infer/s**: completed inferences per second (requests x batch), merged over the
  stable windows of a level (perf_analyzer's method: a level is stable when its last
  windows agree within the profile's tolerance). The same name on every table and chart.
* **req/s**: a streaming model's rate, in its place: requests per second (each request
  streams many responses; tok/s counts those).
* **p50 / p95 / p99**: exact percentiles of client-measured latency.
* **queue / compute**: Triton's own statistics, per request: time waiting in the
  scheduler queue versus compute (input + infer + output). Queue growing while compute
  stays flat means the GPUs are saturated.
* **avg batch**: inference count / execution count, the dynamic batcher at work.
* **client BOUND**: the load generator judged itself the limit (CPU, event-loop lag,
  late sends); the server may be faster than measured.
* **throughput** (bars): each level's infer/s against the highest on screen; read top to
  bottom they are the throughput-vs-concurrency curve (equal bars at the bottom: saturated).
* **host cpu / ours**: the machine's CPU, and the share of it this tool's own processes use
  (load generator included, the embedded server excluded), both in % of the whole machine
  (all its cores: 0-100 %), on the screen and in the headless log alike.
* **$/1k img**: hardware.cost_per_hour / (infer/s x 3600) x 1000.
* **scaling efficiency**: throughput at N GPUs / (N x throughput at 1 GPU).
* **training bill**: probe.dataset_size / samples/s per epoch, at the world size's share of
  hardware.cost_per_hour; the CI is samples/s's, turned over (a reciprocal's bounds swap).
  "Stop at N GPUs": the last added GPU still gave at least half of one GPU's samples/s.

Times are session time (from the events), never the wall clock, so a replay shows
exactly what the live run showed.
"""


def recording_section(path: Path | None, live: bool) -> str:
    """Where this session's recording is (absolute: the folder you started in is easy to forget)."""
    if path is None:
        return "## Recording\n\nThis session is not recorded.\n\n"
    what = "This session is recorded to" if live else "Replaying"
    return f"## Recording\n\n{what} `{path.resolve()}`\n\n"


def help_text(views: Iterable[View], path: Path | None, live: bool) -> str:
    """The help's Markdown: the recording, then the keys (a line per view shown), then the numbers."""
    rows = "".join(f"| `{v.key}` | view: {v.title} |\n" for v in views)  # what each shows: the palette says
    return HELP.replace("{views}", rows, 1).replace("## Keys", recording_section(path, live) + "## Keys", 1)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close"),
    ]

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(Markdown(self.text))  # Rich's Markdown: one widget, cheap to open

    def on_mount(self) -> None:
        self.query_one("#help-box").border_title = "help · esc closes"
        self.query_one("#help-box").focus()
