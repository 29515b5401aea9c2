"""Each server API's sweep as the session runs it (load.api), so that the session stays a conductor.

Triton's (``triton_sweep``): the target the session opened, swept from this host or by the group
it heads (engine/multihost/head.py's sweep_of), the embedded server's HTTP threads watched.
OpenAI's (``OpenAiSweep``): the key is read once, when the session is made (it masks it from the
start); the server's model is read from ``GET /v1/models`` before any load; the sweep goes
through the seam (engine/load/sweep.py's run_sweep), on this host alone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from engine import events as ev
from engine.errors import UserError
from engine.load.sweep import Publish, run_sweep
from engine.multihost.head import SweepOptions, sweep_of
from engine.openai.api import OpenAiApi
from engine.openai.target import api_key, open_target
from engine.profiles import Load, Profile
from engine.server.supervisor import ServerSupervisor
from engine.triton.target import Target, TargetInfo


async def triton_sweep(options: SweepOptions, servers: ServerSupervisor, target: Target, info: TargetInfo,
                       load: Load, publish: Publish, stop: asyncio.Event) -> list[ev.LevelResult]:
    """A Triton model's sweep; every event is shown to the server supervisor as it passes."""
    publish(ev.PhaseChanged(phase="sweep", detail=f"{load.mode} sweep on {target.model} over {load.transport}"))
    spread = asyncio.create_task(servers.watch_http_threads(target.http_url))

    def observed(event: ev.Event) -> None:
        servers.observe(event)
        publish(event)

    try:
        return await sweep_of(options, target, info, load, observed, stop, servers.gpus)
    finally:
        spread.cancel()


class OpenAiSweep:
    """One OpenAI-compatible server's model, swept as the profile says. Raises UserError for what
    this API does not do yet (several load hosts, the wire check) and for a key it cannot read."""

    def __init__(self, profile: Profile, several_hosts: bool) -> None:
        if several_hosts:
            raise UserError("load.api = 'openai': several load hosts (--hosts) are not supported yet; run one host")
        if profile.load.wire_check:
            raise UserError("load.wire_check: the wire check measures Triton's request path; not with load.api = 'openai'")
        self.profile = profile
        self.key = api_key(profile.load.api_key_env, profile.load.api_key_file)
        self._api: OpenAiApi | None = None
        self._announced = False  # ServerReady published

    def secrets(self) -> list[str]:
        """What no published line may show."""
        return [self.key] if self.key else []

    async def api(self) -> OpenAiApi:
        """The server's model (GET /v1/models), checked before any load: opened once."""
        if self._api is None:
            url, *more = self.profile.server.endpoint_urls()
            target = await open_target(url, self.profile.model.name, self.key)
            for other in more:  # replicas: each must serve the model measured
                await open_target(other, target.model, self.key)
            self._api = OpenAiApi(target, self.key, more)
        return self._api

    async def sweep(self, profile: Profile, publish: Publish, stop: asyncio.Event,
                    more_levels: Callable[[list[ev.LevelResult]], float | None] | None) -> list[ev.LevelResult]:
        api = await self.api()
        load = profile.load
        if not self._announced:  # the server and its model, as a Triton target is announced (reports name the model)
            self._announced = True
            publish(ev.ServerReady(http_url=api.target.url, metrics_url=None, embedded=False, model=api.model,
                                   transport=load.transport))
        publish(ev.PhaseChanged(phase="sweep", detail=f"{load.mode} sweep on {api.model} over {load.transport}"))
        return await run_sweep(api, load, publish, stop, more_levels=more_levels)
