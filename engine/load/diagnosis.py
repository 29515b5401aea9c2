"""GPUSCALE_LOAD_DIAG: the load engine's experiment and fault-injection switches, read once.

For bench/ A/B runs and the tests, never a user setting: "sndbuf=4194304,burst,lazy,stall_ms=15".
- sndbuf: a fixed socket send buffer;
- burst: open a level's connections all at once from asyncio (the first way);
- one_by_one: open them one at a time (the second way, Worker.open_one_by_one);
- group=G and stagger_us=S: tight groups of G, workers' first groups S apart, instead of
  OPEN_GROUP and OPEN_STAGGER_NS (engine/load/worker.py);
- rate_cold: rate mode as before session 8: each connection sends one request while the level
  opens (no warming), and a busy worker opens one connection at a time (Worker.open_more);
- lazy: connect at T0;
- stall_ms: busy a worker's loop that long every 20 ms (a deliberately slowed worker);
- cuda_gpu=K: cuda_shm's inputs on GPU K; cuda_each: a copy on each GPU, load worker w naming
  copy w mod N (engine/load/shm.py).
"""

from __future__ import annotations

import os

DIAG_ENV = "GPUSCALE_LOAD_DIAG"


def diagnosis_knobs(text: str | None = None) -> dict[str, int]:
    """The switches in ``text`` (default: the environment), a bare name counting as 1."""
    if text is None:
        text = os.environ.get(DIAG_ENV, "")
    knobs: dict[str, int] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, _, value = item.partition("=")
        knobs[name] = int(value or 1)
    return knobs
