"""Rate mode's arrival processes (load.arrival): the gap before each next send, as a multiple of
the mean gap (1 / the worker's rate), so that every process keeps the level's rate.

- "constant": every gap the mean;
- "poisson": exponential gaps (coefficient of variation 1);
- "gamma": gamma gaps of shape load.burstiness and mean 1, as vLLM's benchmark draws them: a
  burstiness below 1 sends in bursts (coefficient of variation 1/sqrt(burstiness)), 1 is Poisson,
  above 1 is steadier than Poisson.
"""

from __future__ import annotations

import random

ARRIVALS = ("constant", "poisson", "gamma")


def gap_factor(rng: random.Random, arrival: str, burstiness: float = 1.0) -> float:
    """The next gap over the mean gap."""
    if arrival == "poisson":
        return rng.expovariate(1.0)
    if arrival == "gamma":
        return rng.gammavariate(burstiness, 1.0 / burstiness)
    return 1.0
