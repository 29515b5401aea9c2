"""What every host of a group runs: its share of each level, on windows that line up.

Each host runs the profile's levels at its share (engine/multihost/shares.py), each level for
``load.max_windows`` windows of ``load.window_ms`` (no host stops a level on its own: the head
applies the stability rule to the merged windows), measured once (no trials: a remeasure is the
head's decision, and it does not take one), and a window is not stretched for a minimum of
requests beyond one, so that the hosts' window k covers the same instants."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from engine.errors import UserError
from engine.modes import mode_of
from engine.multihost.shares import host_share, too_small
from engine.profiles import Load, Profile
from engine.transport_table import transport_spec


def host_load(load: Load, hosts: int, rank: int) -> Load:
    """The load this host runs."""
    mode = mode_of(load.mode)
    shares = [host_share(level, hosts, rank, mode.open_loop) for level in mode.levels(load)]
    fixed = dataclasses.replace(load, stable_windows=load.max_windows, max_trials=1, min_window_requests=1)
    if mode.open_loop:
        return dataclasses.replace(fixed, rates=shares)
    return dataclasses.replace(fixed, concurrency=[int(s) for s in shares])


def check_plan(profile: Profile, hosts: int) -> None:
    """What a group cannot run, one line each (UserError)."""
    load = profile.load
    mode = mode_of(load.mode)
    if small := too_small(mode.levels(load), hosts, mode.open_loop):
        raise UserError(f"load.concurrency {', '.join(f'{lv:g}' for lv in small)}: below --hosts {hosts}, some host "
                        "would have no connection: give every level at least one connection per host")
    if transport_spec(load.transport).streams:
        raise UserError(f"--hosts: load.transport = {load.transport!r}: a streaming sweep runs from one host "
                        "(its TTFT and ITL are not merged across hosts)")
    if load.wire_check:
        raise UserError("--hosts: the wire check (--wire, load.wire_check) runs from one host: leave it out here")
    if profile.server.kind != "remote":
        raise UserError("--hosts: every host sends to the same servers: give their URL (--url or server.url), "
                        "e.g. one started by `gpuscale-tui server`")


def fingerprint(profile: Profile) -> str:
    """A short digest of what the hosts must agree on: the model, how many servers, and the load. Not
    the servers' URLs: a host may reach the same server by another name (the head by 127.0.0.1)."""
    load = profile.load
    mode = mode_of(load.mode)
    plan = {"model": profile.model.name, "servers": len(profile.server.endpoint_urls()), "mode": str(load.mode),
            "levels": mode.levels(load), "window_ms": load.window_ms, "max_windows": load.max_windows,
            "warmup_s": load.warmup_s, "batch": load.batch_size, "transport": load.transport}
    return hashlib.sha256(json.dumps(plan, sort_keys=True, default=str).encode()).hexdigest()[:12]
