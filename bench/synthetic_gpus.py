"""The tool with N synthetic GPUs, and no others: a bench's stand-in for a box of that many GPUs, so that a
measurement of the display's cost (tui_overhead) draws N GPUs' rows and histories at the chosen
sample rate on any machine. The readings come through the sampler as a real source's would
(engine/telemetry/registry.py); their numbers move, so every sample changes what is drawn.

    python -m bench.synthetic_gpus --gpus 8 --hz 5 -- --profile local ...   (gpuscale-tui's own flags)
"""

from __future__ import annotations

import math
import sys
import time

from engine.events import GpuReading
from engine.telemetry.gpu_source import GpuSource, SourceContext, TelemetrySettings

SOURCE = "synthetic"
MEM_TOTAL = 80 * 2**30


class SyntheticGpus(GpuSource):
    name = SOURCE
    read_at_start = True

    def __init__(self, count: int, interval_s: float) -> None:
        self.count = count
        self.interval_s = interval_s
        self._start = time.monotonic()

    def open(self, ctx: SourceContext) -> bool:
        return True

    def read(self) -> list[GpuReading]:
        t = time.monotonic() - self._start
        out = []
        for i in range(self.count):
            wave = 0.5 + 0.5 * math.sin(t / 7.0 + i)  # each GPU its own phase
            out.append(GpuReading(
                uuid=f"GPU-synthetic-{i}", index=i, source=SOURCE, name="Synthetic GPU",
                util_gpu=round(100 * wave, 1), util_mem=round(60 * wave, 1), mem_used=int(MEM_TOTAL * (0.2 + 0.6 * wave)),
                mem_total=MEM_TOTAL, power_w=round(100 + 500 * wave, 1), power_limit_w=700.0, temp_c=round(40 + 30 * wave, 1),
                sm_clock_mhz=1980.0,
            ))
        return out


def register(count: int, hz: float) -> None:
    """Make the synthetic source the sampler's only GPU source (this process only): a box's own
    GPUs (NVML, the server's /metrics) would add rows of their own."""
    from engine.telemetry.registry import GPU_SOURCES

    for name in ("nvml", "triton"):
        GPU_SOURCES.unregister(name)
    def factory(settings: TelemetrySettings) -> SyntheticGpus:
        return SyntheticGpus(count, 1.0 / hz)

    GPU_SOURCES.register(SOURCE, factory)


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.synthetic_gpus", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--hz", type=float, default=5.0, help="samples per second (at most 10: the sampler's floor is 0.1 s)")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- then gpuscale-tui's arguments")
    args = parser.parse_args(argv)
    if args.gpus < 1 or not 0 < args.hz <= 10:
        parser.error("--gpus must be >= 1 and --hz in (0, 10]")
    register(args.gpus, args.hz)
    from tui.cli import main as tool

    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    return tool(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
