"""Developer settings of the load engine: for tests and A/B runs, never a measurement to report.

They come from the profile (``load.dev_*`` keys), so a recording made with one carries it in its
profile, and the sweep announces each as a warning. Each switches one path a test needs:
- ``open_burst``: a level's connections open all at once, the way that lost (they pile onto one
  of Triton's HTTP threads; the session's spread warning is tested with it);
- ``stall_ms``: each load worker's loop is kept busy this long every 20 ms (a deliberately slowed
  client, which the client audit must call client-bound);
- ``samples_dir``: each level's latency samples (its merged windows', int64 ns) are written to a
  file in this folder, so that a test can check figures merged from histograms against them.
Standard library only: load workers import it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.profiles import Load

STALL_EVERY_NS = 20_000_000


@dataclass(frozen=True)
class LoadDev:
    open_burst: bool = False
    stall_ms: int = 0
    samples_dir: str = ""

    @classmethod
    def from_load(cls, load: Load) -> LoadDev:
        """The settings of a profile's Load (its ``dev_<name>`` keys)."""
        return cls(open_burst=load.dev_open_burst, stall_ms=load.dev_stall_ms,
                   samples_dir=load.dev_samples_dir)

    def in_effect(self) -> list[str]:
        """'load.dev_stall_ms = 15' for each setting away from its default."""
        return [f"load.dev_{f.name} = {getattr(self, f.name)!r}".replace("True", "true")
                for f in fields(self) if getattr(self, f.name) != f.default]

    def save_samples(self, index: int, trial: int, samples_ns: Any) -> None:
        """A level's latency samples (a numpy int64 array) as ``level<index>_trial<trial>.i64``."""
        if self.samples_dir:
            folder = Path(self.samples_dir)
            folder.mkdir(parents=True, exist_ok=True)
            samples_ns.tofile(folder / f"level{index}_trial{trial}.i64")

    def warning(self) -> str | None:
        """The line a sweep publishes when any is set, or None."""
        settings = self.in_effect()
        if not settings:
            return None
        return f"developer settings in effect ({', '.join(settings)}): not a measurement to report"
