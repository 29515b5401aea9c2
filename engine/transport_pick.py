"""load.transport = auto made a transport of the table: where the server runs (the tool's own,
a URL on this machine, another machine), what the tool's own server runs the model on, whether
torch with CUDA is here and how many hosts send; engine/transport_table.py's auto_transport decides."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace

from engine.profiles import Profile, scale_out_parts
from engine.transport_table import (
    AUTO,
    DEFAULT_TRANSPORT,
    EMBEDDED,
    LOCAL,
    OPENAI,
    OPENAI_DEFAULT,
    REMOTE,
    TransportPick,
    auto_transport,
)


def with_auto_transport(profile: Profile, gpus_present: Callable[[], int],
                        hosts: int = 1) -> tuple[Profile, TransportPick | None]:
    """The profile with its transport picked, and the pick (None: load.transport was not auto,
    the profile is returned as it is). ``gpus_present``: the GPUs this machine gives the tool's
    own server (read only for it); ``hosts``: client hosts sending the load."""
    load, server, model = profile.load, profile.server, profile.model
    if load.api == OPENAI:  # the OpenAI API has its own transports: http (the default) or auto is its default
        if load.transport not in (AUTO, DEFAULT_TRANSPORT):
            return profile, None
        pick = TransportPick(OPENAI_DEFAULT, "the OpenAI API's chat completions, streamed (TTFT and ITL are measured)",
                             load.transport)
        return replace(profile, load=replace(load, transport=pick.name)), pick
    if load.transport != AUTO:
        return profile, None
    from engine.record.findings import server_on_this_machine

    gpus = streams = False
    if server.kind == "embedded":
        from engine.server.repository import chosen_config, decoupled, on_gpus

        parts = scale_out_parts(model.variant)  # each server of a scale-out runs the base config
        count = gpus_present()
        config = chosen_config(model.name, parts[0] if parts else model.variant, count) or ""
        where, gpus, streams = EMBEDDED, count > 0 and on_gpus(config), decoupled(config)
    elif all(server_on_this_machine({"http_url": url}) for url in server.endpoint_urls()):
        where = LOCAL
    else:
        where = REMOTE
    cuda = False
    if where == EMBEDDED and gpus and not streams and hosts == 1:  # torch is imported only where it may decide
        from engine.triton.shm import torch_cuda_here

        cuda = torch_cuda_here()
    pick = auto_transport(where, gpus, cuda, hosts=hosts, streams=streams, linux=sys.platform.startswith("linux"))
    return replace(profile, load=replace(load, transport=pick.name)), pick
