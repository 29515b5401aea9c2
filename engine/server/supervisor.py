"""The embedded server's life in a session: start it (one Triton, or a scale-out's fleet of
them), watch it (one that dies is named at once, with how it ended), watch how its HTTP threads
carry our connections during a sweep, and stop it. Everything it has to say goes out as events.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine import events as ev
from engine.http_threads import SpreadWatch
from engine.modes import mode_of
from engine.profiles import Model, Server, scale_out_parts
from engine.server.embedded import EmbeddedServer
from engine.server.fleet import ServerFleet

SERVER_CHECK_S = 0.5  # how soon a dead embedded server is named
FRONTEND_SAMPLE_S = 0.25  # how often a level samples the server's HTTP-thread spread of our connections
Publish = Callable[[ev.Event], None]


@dataclass(frozen=True)
class FleetMember:
    """One server of a scale-out, as the load engine will address it."""

    http_url: str
    metrics_url: str | None
    grpc_url: str | None
    gpu: int | None  # the GPU it is pinned to, in this process's numbering


@dataclass(frozen=True)
class Served:
    """What a started embedded server offers the load engine."""

    http_url: str
    metrics_url: str
    variant: str
    log_path: str
    mps: bool | None  # None: not on GPUs
    mps_why: str
    fleet: tuple[FleetMember, ...] = ()  # a scale-out's servers (empty for one server)


class ServerSupervisor:
    """Owns the session's embedded server from start to stop (``server`` is None outside that)."""

    def __init__(self, publish: Publish) -> None:
        self.publish = publish
        self.server: EmbeddedServer | ServerFleet | None = None
        self.lost: str | None = None  # the server died under us: why
        self.fleet_lost: list[str] = []  # each server of a scale-out that died: "server 2 of 2 (GPU 1) (ep2) exited (...)"
        self._spread: SpreadWatch | None = None  # while a sweep runs
        self._frontend_said = False
        self._stats_dropped = 0  # the server's statistics values left out as impossible

    @property
    def gpus(self) -> tuple[int, ...]:
        """Where the model has instances (none: on CPU, or no server of ours)."""
        prepared = self.server.prepared if self.server is not None else None
        return tuple(prepared.gpus) if prepared else ()

    async def start(self, model: Model, server: Server, *, gpu_count: int, log_dir: Path | None,
                    model_control: str | None, extra_models: tuple[str, ...]) -> Served:
        scale_out = scale_out_parts(model.variant)
        what = f"{scale_out[1]} embedded Tritons ({scale_out[0]} each)" if scale_out else "embedded Triton"
        self.publish(ev.PhaseChanged(phase="starting server", detail=f"{what}, model {model.name}"))
        started = (ServerFleet if scale_out else EmbeddedServer)(
            model=model.name, variant=model.variant, log_dir=log_dir, gpu_count=gpu_count, weights=model.weights,
            bind_address=server.bind_address, startup_timeout_s=server.startup_timeout_s,
            model_control=model_control, extra_models=extra_models, mps=server.mps,
        )
        self.server = started
        await asyncio.get_running_loop().run_in_executor(None, started.start)
        on_gpus = bool(self.gpus)
        fleet: tuple[FleetMember, ...] = ()
        if isinstance(started, ServerFleet):
            fleet = tuple(FleetMember(one.http_url, one.metrics_url if on_gpus else None, one.grpc_url, gpu)
                          for one, gpu in zip(started.servers, started.client_gpus, strict=True))
            if started.shared and scale_out:
                self.publish(ev.Warning(source="server", key="scale-out-shared", message=(
                    f"{model.variant}: {scale_out[1]} servers share {gpu_count} GPU(s): this shows the "
                    "mechanics of scale-out, not what N one-GPU boxes would do")))
        mps, mps_why = (started.mps_used, started.mps_why) if on_gpus else (None, "")
        if on_gpus and server.mps == "auto" and not mps:
            self.publish(ev.Warning(source="server", key="mps", message=(
                f"embedded server without MPS ({mps_why}): its model instances take turns on each GPU")))
        return Served(started.http_url, started.metrics_url, started.variant, str(started.log_path), mps, mps_why,
                      fleet)

    # ----------------------------------------------------------------- its death

    async def watch(self, on_lost: Callable[[str], None]) -> None:
        """The embedded server died (killed, crashed): say so at once, with how it ended, then
        ``on_lost(why)``, rather than let a sweep wait out timeouts against nothing. A fleet's
        servers are named one by one as they die; the run is lost when every one is gone."""
        server = self.server
        if server is None:
            return
        if isinstance(server, ServerFleet) and len(server.servers) > 1:
            await self._watch_fleet(server)
        else:
            while server.alive():
                await asyncio.sleep(SERVER_CHECK_S)
        if self.server is not server:  # stopped by us
            return
        self.lost = f"the embedded Triton server exited ({server.exit_reason()})"
        self.publish(ev.Error(source="server", message=f"{self.lost}; log: {server.log_path}", fatal=True))
        on_lost(self.lost)

    async def _watch_fleet(self, fleet: ServerFleet) -> None:
        named: set[int] = set()
        while True:
            for i, one in enumerate(fleet.servers):
                if i not in named and not one.alive():
                    named.add(i)
                    reason = one.exit_reason()
                    self.fleet_lost.append(f"{fleet.name(i)} (ep{i + 1}) exited ({reason})")
                    self.publish(ev.Warning(source="server", key=f"fleet-lost-{i}", message=(
                        f"{fleet.name(i)} (ep{i + 1}, {one.http_url}) exited ({reason}); the other servers "
                        f"go on; log: {one.log_path}")))
            if len(named) == len(fleet.servers):
                return
            await asyncio.sleep(SERVER_CHECK_S)

    # ----------------------------------------------------------------- during a sweep

    async def watch_http_threads(self, http_url: str) -> None:
        """Sample which of the server's HTTP threads holds each of our connections
        (engine/http_threads.py), per level, until cancelled; ``observe`` judges it at each
        level's end."""
        from engine.http_threads import available, child_named

        server = self.server
        if server is None or not server.pid:
            return
        if not available():
            self.publish(ev.Warning(source="server", key="frontend-spread",
                                    message="no /proc here: the HTTP-thread spread of our connections is not watched"))
            return
        pid = child_named(server.pid, "tritonserver")
        if pid is None:
            return
        port = int(http_url.rsplit(":", 1)[1].split("/")[0])
        self._spread = SpreadWatch(pid, port)
        self._frontend_said = False  # the thread-limit warning: once per sweep
        try:
            while True:
                await asyncio.sleep(FRONTEND_SAMPLE_S)
                if self._spread is not None:
                    await asyncio.to_thread(self._spread.sample)
        finally:
            self._spread = None

    def observe(self, event: ev.Event) -> None:
        """A sweep's event on its way out: at each level's start and end, the HTTP-thread spread
        of our connections; the first window whose server statistics held impossible values."""
        spread = self._spread
        if spread is not None and isinstance(event, ev.LevelStarted):
            spread.reset()
        elif spread is not None and isinstance(event, ev.LevelResult) and spread.owners and not self._frontend_said:
            from engine.http_threads import http_thread_count, thread_limit

            opened = int(event.level) if not mode_of(event.mode).open_loop else 0
            # once per sweep, and only where the busiest thread was measured at its limit
            finding = thread_limit(spread.per_thread(), http_thread_count(spread.threads.pid),
                                   spread.busiest_cpu_percent(), opened)
            if finding:
                self._frontend_said = True
                self.publish(ev.Warning(source="server", key="frontend",
                                        message=f"level {event.level:g} (said once per sweep): {finding}"))
        if isinstance(event, ev.WindowResult) and event.server is not None and event.server.dropped:
            self._stats_dropped += len(event.server.dropped)
            if self._stats_dropped == len(event.server.dropped):  # the first: said once
                self.publish(ev.Warning(source="server", key="stats-dropped", message=(
                    f"level {event.level:g}: the server's statistics hold impossible values "
                    f"({', '.join(event.server.dropped[:4])}: not finite numbers, negative, or above the client's "
                    "own time): left out of the server breakdown, and counted in each window's record")))

    # ----------------------------------------------------------------- stop

    async def stop(self) -> None:
        if self.server is None:
            return
        server, self.server = self.server, None  # the watcher knows: stopped by us
        await asyncio.get_running_loop().run_in_executor(None, server.stop)
        self.publish(ev.ServerStopped(reason="session ended"))
        if server.left_behind:  # e.g. a stub stuck in the driver: it may still hold GPU memory
            self.publish(ev.Warning(source="server", key="left-behind", message=(
                f"still alive after the server's stop: {', '.join(server.left_behind)}")))
