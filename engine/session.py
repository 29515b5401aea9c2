"""One run of the tool: box check, server, telemetry, load sweep, training probe, recording.

The Session conducts: it starts each part in turn, hands every part one way to speak (``_publish``:
credentials masked, then the bus) and decides nothing after the fact. How the run ends is
engine/outcome.py's pure function of what was published; the server's life is
engine/server/supervisor.py's; the sweep marks its own levels; the recorder reports its own
failure. It runs in its own thread with its own asyncio loop (an EventSource); the recorder is
its first subscriber, so every session is recorded whatever shows it (TUI, headless printer,
nothing). Front-ends steer it with the thread-safe request_sweep / cancel_sweep /
request_probe / stop, and learn when it is busy from ``on_busy``.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from engine import events as ev
from engine.api_sweep import OpenAiSweep, triton_sweep
from engine.bus import EventBus
from engine.errors import RunFailed, UserError, missing_extra, require_extra
from engine.hostinfo import host_facts, software_versions
from engine.load.sweep import SweepStop
from engine.modes import mode_of
from engine.multihost.head import HostGroup
from engine.outcome import EXIT_BAD_INPUT, EXIT_FAILED, Outcome, RunFacts, RunLedger, outcome
from engine.profiles import Profile, headers_for, profile_secrets
from engine.record.recorder import Recorder
from engine.redact import Redactor
from engine.server.supervisor import ServerSupervisor
from engine.source import EventSource
from engine.telemetry.sampler import TelemetrySampler
from engine.transport_pick import with_auto_transport
from engine.triton.target import Target, TargetInfo

_NO_FREE_TEXT = frozenset({"gpu_sample", "host_sample", "window", "level_started", "topology"})


@dataclass
class SessionOptions:
    sweep: bool = True
    probe: bool | None = None  # None: as the profile says (probe.enabled)
    record_dir: Path | None = Path("recordings")  # None: do not record
    interactive: bool = False  # keep the server up after the plan, waiting for requests (TUI)
    gpu_count: int | None = None  # None: detect
    check: bool = True  # the box check (engine/check) before the server starts
    # a check already taken (a study's, before its first config; its ``reused`` says so): recorded
    # and shown as this session's check instead of measuring the box again
    box_check: ev.BoxCheck | None = None
    # after the planned levels, asked for one more level to run until it answers None (the
    # latency-target search of a scaling study); see engine.load.sweep.run_sweep
    more_levels: Callable[[list[ev.LevelResult]], float | None] | None = None
    model_control: str | None = None  # embedded server: tritonserver --model-control-mode (None: its default)
    hosts: HostGroup | None = None  # this session heads several client hosts (engine/multihost/): their sweep


class Session(EventSource):
    def __init__(self, profile: Profile, options: SessionOptions | None = None, bus: EventBus | None = None) -> None:
        super().__init__(bus)
        self.profile = profile
        self.options = options or SessionOptions()
        self.session_id = uuid.uuid4().hex[:12]
        self.recording_path: Path | None = None
        self.error: str | None = None  # why the session failed, one line
        self.ledger = RunLedger()  # what was published that the run's end depends on
        self.servers = ServerSupervisor(self._publish)
        # load.api = openai (engine/api_sweep.py): its key read now, masked from the start like the profile's secrets
        self._openai = OpenAiSweep(profile, self.options.hosts is not None) if profile.load.api == "openai" else None
        self._secrets = [*profile_secrets(profile), *(self._openai.secrets() if self._openai else [])]
        self._redactor = Redactor(self._secrets)
        self._recorder: Recorder | None = None
        self._telemetry: TelemetrySampler | None = None
        self._target: tuple[Target, TargetInfo] | None = None  # the sweep's server, once started
        # steering, from any thread
        self._loop: asyncio.AbstractEventLoop | None = None
        self._requests: asyncio.Queue[str] | None = None
        self._stopping = threading.Event()
        self._sweep_stop: SweepStop | None = None
        self._probe_stop = threading.Event()
        self._cancelled = False  # the running job was cut short on request: not a failure
        self._busy = False
        self._busy_listeners: list[Callable[[bool], object]] = []
        # what only the conductor knows of how the run went
        self._stopped_mid_job = False
        self._incomplete: str | None = None  # the plan did not run to its end, and nobody asked it to stop
        self._planned_levels = 0  # levels the sweeps were asked to run
        self._ended = False

    @property
    def level_results(self) -> list[ev.LevelResult]:
        return self.ledger.levels

    # ----------------------------------------------------------------- control (any thread)

    def request_sweep(self) -> None:
        self._enqueue("sweep")

    def request_probe(self) -> None:
        self._enqueue("probe")

    def cancel_sweep(self) -> None:
        self._cancelled = True  # asked for: a sweep cut short by the user is not a failed run
        if self._loop and self._sweep_stop is not None:
            self._loop.call_soon_threadsafe(self._sweep_stop.set)
        self._probe_stop.set()

    def stop(self) -> None:
        self._stopping.set()
        self._probe_stop.set()
        if self._loop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._wake)
            except RuntimeError:  # loop already closed
                pass

    def fail(self, source: str, why: str) -> None:
        """A part outside the session failed under it (the serving study's server died): published
        as the run's fatal error, so that its end reads failed with why, then the session stops."""
        self._publish(ev.Error(source=source, message=why, fatal=True))
        self.stop()

    @property
    def busy(self) -> bool:
        """A sweep or the probe is running."""
        return self._busy

    def on_busy(self, listener: Callable[[bool], object]) -> Callable[[], None]:
        """Call ``listener(busy)`` (on the session's thread) whenever a job starts or ends."""
        self._busy_listeners.append(listener)
        return lambda: self._busy_listeners.remove(listener) if listener in self._busy_listeners else None

    def _enqueue(self, job: str) -> None:
        if self._loop is None or self._requests is None:
            return
        self._loop.call_soon_threadsafe(self._requests.put_nowait, job)

    def _wake(self) -> None:
        if self._sweep_stop is not None:
            self._sweep_stop.set()
        if self._requests is not None:
            self._requests.put_nowait("stop")

    # ----------------------------------------------------------------- the one way out

    def _publish(self, event: ev.Event) -> None:
        """Every part speaks through here: credentials are masked before any subscriber (screen,
        log, recording) sees a line, and the ledger keeps what the run's end depends on."""
        if event.kind not in _NO_FREE_TEXT:
            event = self._redactor.fields(event)
        self.ledger.apply(event)
        self.bus.publish(event)

    def _recording_failed(self, error: ev.Event) -> None:
        """The recorder could not write (its thread): say so and end the run; what was written stays."""
        if self._ended:
            return
        self._publish(error)
        self.stop()

    def _server_lost(self, why: str) -> None:
        """The embedded server died under us: the level it cuts short failed, and the run ends."""
        if self._sweep_stop is not None:
            self._sweep_stop.fail(why)
        self.stop()

    # ----------------------------------------------------------------- the run

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # last resort: the thread must never die silently
            self.exit_code = EXIT_FAILED
            self._publish(ev.Error(source="session", message=f"internal error: {exc!r}", fatal=True))

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._requests = asyncio.Queue()
        facts = RunFacts()
        try:
            if self._probe_wanted():  # before anything starts: one line naming the pip extra
                require_extra("probe", "the training probe")
            if self.options.sweep and self.profile.server.kind == "embedded":  # not after a box check that is of no use
                require_extra("server", "the embedded server")
            self._open_recording()
            hosts = self.options.hosts.hosts if self.options.hosts is not None else 1
            self.profile, pick = with_auto_transport(self.profile, self._gpus_present, hosts)  # recorded as picked
            self._announce()
            if pick is not None:
                self._publish(ev.Warning(source="session", key="transport-auto", message=pick.line))
            if self.options.check:
                await self._box_check()
            if self.options.sweep:  # --probe-only: the probe needs no server; a sweep asked for later opens it
                await (self._openai.api() if self._openai else self._open_target())
            server_watch = asyncio.create_task(self.servers.watch(self._server_lost))
            self._start_telemetry()
            plan = (["sweep"] if self.options.sweep else []) + (["probe"] if self._probe_wanted() else [])
            for job in plan:
                if self._stopping.is_set():
                    break
                await self._run_job(job)
            while self.options.interactive and not self._stopping.is_set():
                self._publish(ev.PhaseChanged(phase="idle", detail="waiting: start a sweep or the probe"))
                job = await self._requests.get()
                if job != "stop":
                    await self._run_job(job)
            server_watch.cancel()
            facts = self._facts()
            if outcome(facts).status == "ok":  # the gates are judged on a run that finished
                facts = replace(facts, gate_failures=tuple(self._gate_failures()))
        except (UserError, RunFailed) as exc:
            facts = RunFacts(raised=exc)
            self._publish(ev.Error(source="session", message=str(exc), fatal=True))
        except Exception as exc:
            facts = RunFacts(raised=exc)
            self._publish(ev.Error(source="session", message=f"internal error: {type(exc).__name__}: {exc}", fatal=True,
                                   detail=traceback.format_exc(limit=8)))
        finally:
            await self._shutdown()
            self._end(outcome(facts))

    def _facts(self) -> RunFacts:
        return RunFacts(
            level_statuses=self.ledger.statuses(), planned_levels=self._planned_levels,
            record_error=self.ledger.record_error, fatal_error=self.ledger.fatal_error,
            stop_asked=self._stopping.is_set(), interactive=self.options.interactive,
            stopped_mid_job=self._stopped_mid_job, incomplete=self._incomplete,
            degraded=self.ledger.degraded(), servers_lost=tuple(self.servers.fleet_lost),
            first_failure=self.ledger.first_failure())

    def _end(self, end: Outcome) -> None:
        self.exit_code = end.exit_code
        self.error = self._redactor.text(end.error) if end.error else end.error
        self._publish(ev.SessionEnded(status=end.status, error=end.error, exit_code=end.exit_code))
        self._ended = True
        if self._recorder is not None:
            self._recorder.close()
            if end.exit_code == EXIT_BAD_INPUT and not self.ledger.measured and self._recorder.discard():
                self.recording_path = None  # bad input found after the start, nothing measured

    def _announce(self) -> None:
        versions = software_versions()  # reads NVML: once
        probe = self._probe_wanted()
        self._publish(ev.SessionStarted(
            session_id=self.session_id, profile_name=self.profile.name, profile=self.profile.to_dict(redact=True),
            mode="all" if self.options.sweep and probe else ("probe" if probe else "sweep"),
            host=host_facts(), versions=versions, tool_version=versions.get("gpuscale_tui") or "",
        ))

    def _probe_wanted(self) -> bool:
        return self.profile.probe.enabled if self.options.probe is None else self.options.probe

    def _gate_failures(self) -> list[str]:
        """The profile's gates on this run (min_efficiency needs several: `gpuscale-tui compare` gates it)."""
        from engine.analysis.gates import evaluate_gates, gate_word

        failures = evaluate_gates(replace(self.profile.gates, min_efficiency=None), self.level_results)
        for failure in failures:
            self._publish(ev.Error(source="gates", message=f"{gate_word(failure)}: {failure}"))
        return failures

    def _open_recording(self) -> None:
        if self.options.record_dir is None:
            return
        from engine.record.naming import recording_path

        hw = self.profile.hardware
        gpu_count = hw.gpu_count or self._gpus_present()
        gpu_model = hw.gpu_model if hw.gpu_count else ("gpu" if gpu_count else "cpu")
        self.recording_path = recording_path(self.options.record_dir, gpu_model=gpu_model, gpu_count=gpu_count,
                                             profile_name=self.profile.name, when=datetime.now(UTC))
        self._recorder = Recorder(self.recording_path, secrets=self._secrets,
                                  report=self._recording_failed)
        self.bus.subscribe(self._recorder)

    def _gpus_present(self) -> int:
        """GPUs this session may use, read once (NVML start-up is not free)."""
        if self.options.gpu_count is None:
            from engine.server.gpus import visible_gpu_count

            self.options.gpu_count = visible_gpu_count()
        return self.options.gpu_count

    # ----------------------------------------------------------------- the parts, in turn

    async def _box_check(self) -> None:
        if self.profile.server.kind == "remote" and not self._probe_wanted():
            return  # the GPUs being measured are on another machine
        from engine.check.run import check_before_run, expected_from_profile

        await check_before_run(expected_from_profile(self.profile), self.options.record_dir or Path("."),
                               self._publish, allreduce=self._probe_wanted(), stop=self._probe_stop,
                               taken=self.options.box_check)

    async def _open_target(self) -> tuple[Target, TargetInfo]:
        """The sweep's server: the embedded one started (engine/server/supervisor.py) or the
        profile's remote one(s), described and checked (engine/triton/target_setup.py)."""
        if self._target is None:
            from engine.triton.target_setup import open_target
            from engine.wire_check import WIRE_MODEL

            started = None
            if self.profile.server.kind == "embedded":
                log_dir = self.recording_path.parent / f"{self.recording_path.stem}.logs" if self.recording_path else None
                started = await self.servers.start(
                    self.profile.model, self.profile.server, gpu_count=self._gpus_present(), log_dir=log_dir,
                    model_control=self.options.model_control,
                    extra_models=(WIRE_MODEL,) if self.profile.load.wire_check else ())
            self._target = await open_target(self.profile, started, self._publish)
        return self._target

    def _start_telemetry(self) -> None:
        from engine.telemetry.host import loopback_port

        t, server, remote = self.profile.telemetry, self.profile.server, self.profile.server.kind == "remote"
        # Triton's own GPU gauges beside NVML's (each reading says its source): the remote server's,
        # or ours on GPUs; none for the probe alone or a CPU-only embedded server (no nv_gpu_* gauges)
        ours = self.servers.server.metrics_url if self.servers.server is not None and self.servers.gpus else None
        metrics_url = next(iter(server.endpoint_metrics_urls()), None) if remote and self.options.sweep else ours
        endpoints = self._target[0].endpoints if self._target is not None else []
        self._telemetry = TelemetrySampler(
            self._publish, nvml_interval_s=t.nvml_interval_s, host_interval_s=t.host_interval_s,
            metrics_url=metrics_url,
            metrics_headers=headers_for(server, metrics_url, *(ep.metrics_url for ep in endpoints)) or None,
            host_server_port=loopback_port(server.endpoint_urls()[0]) if remote else None,
            metrics_endpoints=tuple((ep.name, ep.metrics_url) for ep in endpoints if ep.metrics_url))
        self._telemetry.start()

    async def _run_job(self, job: str) -> None:
        if self._busy:
            self._publish(ev.Warning(source="session", message=f"{job} requested while another job runs: ignored"))
            return
        self._busy = True
        for listener in list(self._busy_listeners):
            listener(True)
        try:
            self._stopped_mid_job = False
            if job == "sweep":
                await self._sweep()
            elif job == "probe":
                await self._probe()
        finally:
            self._busy = False
            self._stopped_mid_job = self._stopping.is_set()  # stopped (quit, SIGHUP) in the middle of a job
            for listener in list(self._busy_listeners):
                listener(False)

    async def _sweep(self) -> None:
        self._sweep_stop = SweepStop()
        self._cancelled = False
        if self._stopping.is_set():
            return
        load = self.profile.load
        if self._openai is not None:  # OpenAI's API: this host alone, no wire check (engine/api_sweep.py)
            results = await self._openai.sweep(self.profile, self._publish, self._sweep_stop, self.options.more_levels)
        else:  # Triton's, from this host or heading several (engine/multihost/)
            results = await triton_sweep(self.options, self.servers, *await self._open_target(), load, self._publish,
                                         self._sweep_stop)
        planned = len(mode_of(load.mode).levels(load))
        self._planned_levels += max(planned, len(results))
        cut_short = len(results) < planned or any(r.status == "interrupted" for r in results)
        asked = self._stopping.is_set() or self._cancelled
        if cut_short and not asked and load.on_level_failure != "stop" and not self._incomplete:
            self._incomplete = f"the sweep ended after {len(results)} of {planned} levels"
        if load.on_level_failure == "stop" and any(r.status == "failed" for r in results):
            self._publish(ev.Warning(source="session", message="a level failed and load.on_level_failure = 'stop'"))
        if load.wire_check and results and not (asked or self.servers.lost):
            from engine.wire_check import wire_check

            target, info = await self._open_target()
            skipped = await wire_check(target, info, load, results, self.servers.gpus, self._publish, self._sweep_stop)
            if skipped and not self._incomplete:  # asked for and not done: the run is not "ok"
                self._incomplete = skipped

    async def _probe(self) -> None:
        if missing := missing_extra("probe", "the training probe"):  # asked for in the TUI
            self._publish(ev.Warning(source="probe", key="probe-extra", message=missing))
            return
        from engine.probe.orchestrate import run_probe_job

        self._probe_stop.clear()
        if self._stopping.is_set():
            return
        self._publish(ev.PhaseChanged(phase="probe", detail="training probe"))
        await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(run_probe_job, self.profile.probe, self._publish, self._probe_stop))

    async def _shutdown(self) -> None:
        if self._telemetry is not None:
            try:
                self._telemetry.stop()
            except Exception as exc:
                self._publish(ev.Warning(source="telemetry", message=f"telemetry did not stop cleanly: {exc!r}"))
        await self.servers.stop()
