"""Each host's share of a level driven from several hosts (pure): connections split as evenly
as whole numbers allow (the first hosts take one more), a rate split exactly."""

from __future__ import annotations


def host_share(level: float, hosts: int, rank: int, open_loop: bool) -> float:
    """Rank ``rank``'s part of ``level``: its connections (a closed loop), or its requests/s."""
    if open_loop:
        return level / hosts
    total = int(level)
    return float(total // hosts + (1 if rank < total % hosts else 0))


def too_small(levels: list[float], hosts: int, open_loop: bool) -> list[float]:
    """Concurrency levels that leave some host without a connection."""
    return [] if open_loop else [lv for lv in levels if int(lv) < hosts]
