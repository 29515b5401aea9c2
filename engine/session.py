"""One run of the tool: server, telemetry, load sweep, training probe, recording.

The Session is an EventSource: it runs in its own thread with its own asyncio loop and
publishes everything on its bus. The recorder is its first subscriber, so every session is
recorded whatever shows it (TUI, headless printer, nothing). Front-ends steer it with the
thread-safe methods request_sweep / cancel_sweep / request_probe / stop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import shutil
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine import events as ev
from engine.analysis.stability import none_stable
from engine.bus import EventBus
from engine.errors import RunFailed, UserError, missing_extra, require_extra
from engine.hostinfo import host_facts, software_versions
from engine.modes import mode_of
from engine.profiles import Profile
from engine.record.redact import Redactor
from engine.source import EventSource

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_GATES, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
SERVER_CHECK_S = 0.5  # how soon a dead embedded server is named
FRONTEND_SAMPLE_S = 0.25  # how often a level samples the server's HTTP-thread spread of our connections
WIRE_MODEL = "wire"  # model_repository/embedded/wire: no compute, measures the request path alone
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


def check_input_shapes(wanted: dict[str, list[int]], info: Any) -> None:
    """load.input_shapes against what the server says the model takes: a wrong shape is bad input
    (one line, exit 2), not a sweep of failed requests."""
    inputs = {t["name"]: list(t["shape"]) for t in getattr(info, "inputs", [])}
    batched = getattr(info, "max_batch_size", 0) > 0
    for name, dims in wanted.items():
        if name not in inputs:
            raise UserError(f"load.input_shapes.{name}: expected one of the model's inputs "
                            f"({', '.join(sorted(inputs))}), found {name!r}")
        declared = inputs[name][1:] if batched else inputs[name]
        fits = len(declared) == len(dims) and all(d < 0 or d == x for d, x in zip(declared, dims, strict=True))
        if not fits:
            raise UserError(f"load.input_shapes.{name}: expected a shape matching {declared} (-1 = any), "
                            f"found {dims}")


def _url_password(url: str | None) -> str | None:
    from urllib.parse import urlsplit

    return urlsplit(url).password if url else None


def profile_secrets(profile: Profile) -> list[str]:
    """What must never be shown or recorded: header values (auth) and URL passwords."""
    server = profile.server
    urls = (server.url, server.metrics_url, *server.urls, *server.metrics_urls)
    found = [*server.headers.values(), *(_url_password(u) for u in urls)]
    return [s for s in found if s]


def fleet_endpoints(fleet: Any, on_gpus: bool) -> list[Any]:
    """A scale-out's servers as the load engine's endpoints: each with its own metrics (GPU
    telemetry, when on GPUs) and the GPU it is pinned to, in this process's numbering."""
    from engine.load.target import Endpoint

    return [Endpoint(f"ep{i + 1}", one.http_url, one.metrics_url if on_gpus else None, one.grpc_url,
                     gpus=(gpu,) if gpu is not None else ())
            for i, (one, gpu) in enumerate(zip(fleet.servers, fleet.client_gpus, strict=True))]


class Session(EventSource):
    def __init__(self, profile: Profile, options: SessionOptions | None = None, bus: EventBus | None = None) -> None:
        super().__init__(bus)
        self.profile = profile
        self.options = options or SessionOptions()
        self.session_id = uuid.uuid4().hex[:12]
        self.recording_path: Path | None = None
        self.failed_levels = 0
        self.level_results: list[ev.LevelResult] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._requests: asyncio.Queue[str] | None = None
        self._stopping = threading.Event()
        self._sweep_stop: asyncio.Event | None = None
        self._probe_stop = threading.Event()
        self._busy = False
        self._interrupted_job = False
        self._recorder: Any = None
        self._server: Any = None
        self._late_target: tuple[Any, Any] | None = None  # Triton started for a sweep asked for later
        # several servers (server.urls, or the servers a scale-out started): the load spread over them
        self._endpoints: list[Any] = []
        self._telemetry: Any = None
        self._record_error: str | None = None
        self.error: str | None = None  # why the session failed, one line
        self._redactor = Redactor(profile_secrets(profile))
        self._fatal_error: str | None = None  # the first fatal error published by any part
        self._incomplete: str | None = None  # the plan did not run to its end, and nobody asked it to stop
        self._http_threads: Any = None  # engine.http_threads.SpreadWatch while a sweep runs
        self._frontend_said = False
        self._server_lost: str | None = None  # the embedded server died under us: why
        self._rewritten_levels = 0
        self._stats_dropped = 0  # the server's statistics values left out as impossible
        self._planned_levels = 0  # levels the sweeps were asked to run
        self._cancelled = False
        self._measured = False  # any level or probe result: a recording worth keeping
        self.bus.subscribe(self._watch)

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

    @property
    def busy(self) -> bool:
        return self._busy

    # ----------------------------------------------------------------- internals

    def _enqueue(self, job: str) -> None:
        if self._loop is None or self._requests is None:
            return
        self._loop.call_soon_threadsafe(self._requests.put_nowait, job)

    def _wake(self) -> None:
        if self._sweep_stop is not None:
            self._sweep_stop.set()
        if self._requests is not None:
            self._requests.put_nowait("stop")

    def _watch(self, event: ev.Event) -> None:
        if isinstance(event, ev.LevelResult):
            if event.trial > 1:  # a level measured again: its last trial stands
                self.level_results = [r for r in self.level_results
                                      if not (r.index == event.index and r.level == event.level)]
            self.level_results.append(event)
            if event.status == "failed":
                self.failed_levels += 1
        if isinstance(event, (ev.LevelResult, ev.ProbeResult, ev.AllReduceResult)):
            self._measured = True
        if isinstance(event, ev.Error) and event.fatal and self._fatal_error is None:
            self._fatal_error = f"{event.source}: {event.message}"

    def _publish(self, event: ev.Event) -> None:
        self.bus.publish(self._clean(event))

    def _clean(self, event: ev.Event) -> ev.Event:
        """Every line shown on a screen comes from an event: mask credentials before any
        subscriber (screen, log, recording) sees one."""
        if event.kind in _NO_FREE_TEXT:
            return event
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(event):
            value = getattr(event, f.name)
            clean: str | list[str]
            if isinstance(value, str) and value:
                clean = self._redactor.text(value)
            elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                clean = [self._redactor.text(v) for v in value]
            else:
                continue
            if clean != value:
                changes[f.name] = clean
        return dataclasses.replace(event, **changes) if changes else event

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # last resort: the thread must never die silently
            self.exit_code = EXIT_FAILED
            self._publish(ev.Error(source="session", message=f"internal error: {exc!r}", fatal=True))

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._requests = asyncio.Queue()
        status, error, code = "ok", None, EXIT_OK
        try:
            if self._probe_wanted():  # before anything starts: one line naming the pip extra
                require_extra("probe", "the training probe")
            self._open_recording()
            watcher = asyncio.create_task(self._watch_recorder())
            versions = software_versions()  # reads NVML: once
            self._publish(
                ev.SessionStarted(
                    session_id=self.session_id,
                    profile_name=self.profile.name,
                    profile=self.profile.to_dict(redact=True),
                    mode=self._mode(),
                    host=host_facts(),
                    versions=versions,
                    tool_version=versions.get("gpuscale_tui") or "",
                )
            )
            if self.options.check:
                await self._box_check()
            # --probe-only: the probe needs no Triton; a sweep asked for later (TUI) starts it then
            target, info = (await self._start_server()) if self.options.sweep else (None, None)
            server_watch = asyncio.create_task(self._watch_server())
            self._start_telemetry()
            plan = (["sweep"] if self.options.sweep else []) + (["probe"] if self._probe_wanted() else [])
            for job in plan:
                if self._stopping.is_set():
                    break
                await self._do(job, target, info)
            while self.options.interactive and not self._stopping.is_set():
                self._publish(ev.PhaseChanged(phase="idle", detail="waiting: start a sweep or the probe"))
                job = await self._requests.get()
                if job != "stop":
                    await self._do(job, target, info)
            watcher.cancel()
            server_watch.cancel()
            failed = [r for r in self.level_results if r.status == "failed"]
            # A run that did not finish all it was asked to do is never "ok" (exit 0).
            if self._record_error:
                status, error, code = "failed", self._record_error, EXIT_FAILED
            elif self._fatal_error:  # a part died (load worker, server): even if a stop came after
                status, error, code = "failed", self._fatal_error, EXIT_FAILED
            elif self._stopping.is_set() and (not self.options.interactive or self._interrupted_job):
                status, code = "interrupted", EXIT_INTERRUPTED
            elif failed:
                status, code = "failed", EXIT_FAILED
                planned = max(self._planned_levels, len(self.level_results))
                unrun = planned - len(self.level_results)
                error = f"{len(failed)} of {planned} levels failed" + (f" ({unrun} not run)" if unrun else "")
            elif self._incomplete:
                status, error, code = "failed", self._incomplete, EXIT_FAILED
            elif gate_failures := self._gate_failures():
                from engine.analysis.gates import gate_exit_code

                status, code = "failed", gate_exit_code(gate_failures)  # 2: a gate that cannot be judged
                error = f"{len(gate_failures)} gate(s) failed: " + "; ".join(gate_failures)
            else:  # finished; when every figure is from a level whose windows disagreed, the end line says so
                error = none_stable([r.status for r in self.level_results]) or None
        except UserError as exc:
            status, error, code = "failed", str(exc), EXIT_BAD_INPUT
            self._publish(ev.Error(source="session", message=str(exc), fatal=True))
        except RunFailed as exc:
            status, error, code = "failed", str(exc), EXIT_FAILED
            self._publish(ev.Error(source="session", message=str(exc), fatal=True))
        except Exception as exc:
            status, error, code = "failed", f"{type(exc).__name__}: {exc}", EXIT_FAILED
            detail = traceback.format_exc(limit=8)
            self._publish(ev.Error(source="session", message=f"internal error: {error}", fatal=True, detail=detail))
        finally:
            await self._shutdown()
            self.exit_code = code
            self.error = self._redactor.text(error) if error else error
            self._publish(ev.SessionEnded(status=status, error=error, exit_code=code))
            self._close_recording()
            if code == EXIT_BAD_INPUT and not self._measured:
                self._discard_recording()

    def _mode(self) -> str:
        probe = self._probe_wanted()
        return "all" if self.options.sweep and probe else ("probe" if probe else "sweep")

    def _probe_wanted(self) -> bool:
        return self.profile.probe.enabled if self.options.probe is None else self.options.probe

    def _gate_failures(self) -> list[str]:
        gates = self.profile.gates
        if gates.min_throughput is None and not gates.max_p99_ms:
            return []  # min_efficiency needs several runs: `gpuscale-tui compare` gates it
        from engine.analysis.gates import evaluate_gates

        failures = evaluate_gates(replace(gates, min_efficiency=None), self.level_results)
        from engine.analysis.gates import gate_word

        for failure in failures:
            self._publish(ev.Error(source="gates", message=f"{gate_word(failure)}: {failure}"))
        return failures

    # ----------------------------------------------------------------- recording

    def _open_recording(self) -> None:
        if self.options.record_dir is None:
            return
        from engine.record.naming import recording_path
        from engine.record.recorder import Recorder

        gpu_model, gpu_count = self._hardware_label()
        self.recording_path = recording_path(
            self.options.record_dir,
            gpu_model=gpu_model,
            gpu_count=gpu_count,
            profile_name=self.profile.name,
            when=datetime.now(UTC),
        )
        self._recorder = Recorder(self.recording_path, secrets=profile_secrets(self.profile))
        self.bus.subscribe(self._recorder)

    async def _watch_recorder(self) -> None:
        """A recording that cannot be written (disk full) ends the session: say so, keep what was written."""
        while self._recorder is not None:
            await asyncio.sleep(0.5)
            if self._recorder.error:
                self._record_error = (
                    f"recording stopped: {self._recorder.error} (disk full?); "
                    f"what was written stays readable: {self.recording_path}"
                )
                self._publish(ev.Error(source="record", message=self._record_error, fatal=True))
                self._stopping.set()
                self._probe_stop.set()
                self._wake()
                return

    def _close_recording(self) -> None:
        if self._recorder is not None:
            self._recorder.close()

    def _discard_recording(self) -> None:
        """Bad input found after the start (an unreachable URL, a wrong input shape): nothing was
        measured, the one line on stderr says why; a "failed" file would only be clutter."""
        path = self.recording_path
        if path is None or self._recorder is None or self._recorder.error:
            return  # not ours (a name that was taken: never touch it), or kept for the record error
        for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            try:
                leftover.unlink()
            except FileNotFoundError:
                pass
            except OSError:
                return
        shutil.rmtree(path.parent / f"{path.stem}.logs", ignore_errors=True)
        self.recording_path = None

    def _hardware_label(self) -> tuple[str, int]:
        hw = self.profile.hardware
        if hw.gpu_count:
            return hw.gpu_model, hw.gpu_count
        count = self._gpus_present()
        return ("gpu" if count else "cpu"), count

    def _gpus_present(self) -> int:
        """GPUs this session may use, read once (NVML start-up is not free)."""
        if self.options.gpu_count is None:
            from engine.server.gpus import visible_gpu_count

            self.options.gpu_count = visible_gpu_count()
        return self.options.gpu_count

    # ----------------------------------------------------------------- box check

    async def _box_check(self) -> None:
        """Is this box fit for the run: recorded, shown, and a no-go says so loudly; it does not
        stop the session (the user chose to run; the recording says what the box was)."""
        if self.profile.server.kind == "remote" and not self._probe_wanted():
            return  # the GPUs being measured are on another machine
        from engine.check.run import expected_from_profile, publish_progress, run_check

        if self.options.box_check is not None:  # taken already: the box has not changed since
            result = replace(self.options.box_check, ts=time.time())
        else:
            self._publish(ev.PhaseChanged(phase="box check", detail="is this box fit for the run"))
            record_dir = self.options.record_dir or Path(".")
            try:
                result = await asyncio.get_running_loop().run_in_executor(None, lambda: run_check(
                    expected_from_profile(self.profile), record_dir, allreduce=self._probe_wanted(),
                    progress=publish_progress(self._publish), stop=self._probe_stop))
            except Exception as exc:  # the check informs the run; it must never be why it failed
                self._publish(ev.Warning(source="check", key="check-failed", message=f"box check did not run: {exc!r}"))
                return
        self._publish(result)
        if result.verdict == "no-go":
            self._publish(ev.Error(source="check", message=result.summary))
        elif result.verdict == "warn":
            self._publish(ev.Warning(source="check", key="check-warn", message=result.summary))

    # ----------------------------------------------------------------- server

    async def _start_server(self) -> tuple[Any, Any]:
        from engine.load.endpoints import describe_endpoints, endpoints_from
        from engine.load.target import Target

        server = self.profile.server
        model = self.profile.model
        if server.kind == "embedded":
            from engine.profiles import scale_out_parts
            from engine.server.embedded import EmbeddedServer
            from engine.server.fleet import ServerFleet

            scale_out = scale_out_parts(model.variant)
            what = f"{scale_out[1]} embedded Tritons ({scale_out[0]} each)" if scale_out else "embedded Triton"
            self._publish(ev.PhaseChanged(phase="starting server", detail=f"{what}, model {model.name}"))
            log_dir = self.recording_path.parent / f"{self.recording_path.stem}.logs" if self.recording_path else None
            self._server = (ServerFleet if scale_out else EmbeddedServer)(
                model=model.name,
                variant=model.variant,
                log_dir=log_dir,
                gpu_count=self._gpus_present(),
                weights=model.weights,
                bind_address=server.bind_address,
                startup_timeout_s=server.startup_timeout_s,
                model_control=self.options.model_control,
                extra_models=(WIRE_MODEL,) if self.profile.load.wire_check else (),
                mps=server.mps,
            )
            await asyncio.get_running_loop().run_in_executor(None, self._server.start)
            http_url, metrics_url, variant = self._server.http_url, self._server.metrics_url, self._server.variant
            log_path = str(self._server.log_path)
            on_gpus = bool(self._server.prepared and self._server.prepared.gpus)
            if scale_out:
                self._endpoints = fleet_endpoints(self._server, on_gpus)
                if self._server.shared:
                    self._publish(ev.Warning(source="server", key="scale-out-shared", message=(
                        f"{model.variant}: {scale_out[1]} servers share {self._gpus_present()} GPU(s): this shows the "
                        "mechanics of scale-out, not what N one-GPU boxes would do")))
            mps, mps_why = (self._server.mps_used, self._server.mps_why) if on_gpus else (None, "")
            if on_gpus and server.mps == "auto" and not mps:
                self._publish(ev.Warning(source="server", key="mps", message=(
                    f"embedded server without MPS ({mps_why}): its model instances take turns on each GPU")))
        else:
            urls = server.endpoint_urls()
            metrics_url = next(iter(server.endpoint_metrics_urls()), None)
            http_url, variant, log_path = urls[0], model.variant, None
            mps, mps_why = None, ""
            if len(urls) > 1:  # several servers: the load spread over them (engine/load/endpoints.py)
                self._endpoints = endpoints_from(urls, server.metrics_urls)
        target = Target(http_url=http_url, model=model.name, model_version=model.version, headers=dict(server.headers),
                        input_shapes={k: list(v) for k, v in self.profile.load.input_shapes.items()},
                        endpoints=list(self._endpoints))
        info = await describe_endpoints(target, server.allow_mixed)
        check_input_shapes(self.profile.load.input_shapes, info)
        from engine.profiles import redact_url

        self._publish(
            ev.ServerReady(
                http_url=redact_url(http_url) or "",
                metrics_url=redact_url(metrics_url),
                embedded=server.kind == "embedded",
                model=model.name,
                model_version=model.version,
                config_variant=variant,
                triton_version=getattr(info, "triton_version", None),
                model_config=getattr(info, "model_config", {}) or {},
                inputs=list(getattr(info, "inputs", []) or []),
                log_path=log_path,
                mps=mps,
                mps_why=mps_why,
                endpoints=[f"{ep.name} {redact_url(ep.http_url)}" for ep in self._endpoints],
            )
        )
        return target, info

    async def _watch_fleet(self, fleet: Any) -> None:
        """A scale-out's servers: one that dies is named (its endpoint's errors say the rest) and
        the others go on; returns when every one is gone."""
        named: set[int] = set()
        while True:
            for i, one in enumerate(fleet.servers):
                if i not in named and not one.alive():
                    named.add(i)
                    self._publish(ev.Warning(source="server", key=f"fleet-lost-{i}", message=(
                        f"{fleet.name(i)} (ep{i + 1}, {one.http_url}) exited ({one.exit_reason()}); the other servers "
                        f"go on; log: {one.log_path}")))
            if len(named) == len(fleet.servers):
                return
            await asyncio.sleep(SERVER_CHECK_S)

    async def _watch_server(self) -> None:
        """The embedded server died (killed, crashed): say so at once, with how it ended, and end
        the session as failed, rather than let the sweep wait out timeouts against nothing."""
        server = self._server
        if server is None:
            return
        if len(getattr(server, "servers", ())) > 1:
            await self._watch_fleet(server)
        else:
            while server.alive():
                await asyncio.sleep(SERVER_CHECK_S)
        if self._server is not server:  # stopped by us
            return
        self._server_lost = f"the embedded Triton server exited ({server.exit_reason()})"
        self._publish(ev.Error(source="server", message=f"{self._server_lost}; log: {server.log_path}", fatal=True))
        self._stopping.set()
        self._probe_stop.set()
        self._wake()

    async def _watch_http_threads(self, target: Any) -> None:
        """The embedded server only: sample which HTTP thread holds each of our connections
        (engine/http_threads.py), per level; _sweep_publish judges it at the level's end."""
        from engine.http_threads import SpreadWatch, available, child_named

        server = self._server
        if server is None or not server.pid:
            return
        if not available():
            self._publish(ev.Warning(source="server", key="frontend-spread",
                                     message="no /proc here: the HTTP-thread spread of our connections is not watched"))
            return
        pid = child_named(server.pid, "tritonserver")
        if pid is None:
            return
        port = int(target.http_url.rsplit(":", 1)[1].split("/")[0])
        self._http_threads = SpreadWatch(pid, port)
        self._frontend_said = False  # the thread-limit warning: once per sweep
        while True:
            await asyncio.sleep(FRONTEND_SAMPLE_S)
            watch = self._http_threads
            if watch is not None:
                await asyncio.to_thread(watch.sample)

    def _sweep_publish(self, event: ev.Event) -> None:
        """The level cut short by the server's death failed (it was not stopped by the user).
        At each level's start and end, the server's HTTP-thread spread of our connections."""
        watch = self._http_threads
        if watch is not None and isinstance(event, ev.LevelStarted):
            watch.reset()
        elif watch is not None and isinstance(event, ev.LevelResult) and watch.owners and not self._frontend_said:
            from engine.http_threads import http_thread_count, thread_limit

            opened = int(event.level) if not mode_of(event.mode).open_loop else 0
            # once per sweep, and only where the busiest thread was measured at its limit
            finding = thread_limit(watch.per_thread(), http_thread_count(watch.threads.pid),
                                   watch.busiest_cpu_percent(), opened)
            if finding:
                self._frontend_said = True
                self._publish(ev.Warning(source="server", key="frontend",
                                         message=f"level {event.level:g} (said once per sweep): {finding}"))
        if isinstance(event, ev.WindowResult) and event.server is not None and event.server.dropped:
            self._stats_dropped += len(event.server.dropped)
            if self._stats_dropped == len(event.server.dropped):  # the first: said once
                self._publish(ev.Warning(source="server", key="stats-dropped", message=(
                    f"level {event.level:g}: the server's statistics hold impossible values "
                    f"({', '.join(event.server.dropped[:4])}: not finite numbers, negative, or above the client's "
                    "own time): left out of the server breakdown, and counted in each window's record")))
        if self._server_lost and isinstance(event, ev.LevelResult) and event.status in ("interrupted", "failed"):
            self._rewritten_levels += event.status == "interrupted"
            event = dataclasses.replace(event, status="failed",
                                        error_messages=[self._server_lost, *event.error_messages])
        elif self._rewritten_levels and isinstance(event, ev.SweepFinished):
            event = dataclasses.replace(event, failed=event.failed + self._rewritten_levels)
        self._publish(event)

    # ----------------------------------------------------------------- telemetry

    def _start_telemetry(self) -> None:
        from engine.telemetry.host import loopback_port
        from engine.telemetry.sampler import TelemetrySampler

        t = self.profile.telemetry
        server = self.profile.server
        if not self.options.sweep and self._server is None:
            metrics_url = None  # probe only: no Triton to ask
        elif server.kind == "remote":
            metrics_url = next(iter(server.endpoint_metrics_urls()), None)
        elif self._server is not None and self._server.prepared and self._server.prepared.gpus:
            # Triton's own GPU gauges beside NVML's: each reading says which source it came from
            metrics_url = self._server.metrics_url
        else:
            metrics_url = None  # a CPU-only embedded server has no nv_gpu_* gauges
        self._telemetry = TelemetrySampler(
            self._publish,
            nvml_interval_s=t.nvml_interval_s,
            host_interval_s=t.host_interval_s,
            metrics_url=metrics_url,
            metrics_headers=dict(server.headers) or None,
            host_server_port=loopback_port(server.endpoint_urls()[0]) if server.kind == "remote" else None,
            metrics_endpoints=tuple((ep.name, ep.metrics_url) for ep in self._endpoints if ep.metrics_url),
        )
        self._telemetry.start()

    # ----------------------------------------------------------------- jobs

    async def _do(self, job: str, target: Any, info: Any) -> None:
        if self._busy:
            self._publish(ev.Warning(source="session", message=f"{job} requested while another job runs: ignored"))
            return
        self._busy = True
        try:
            self._interrupted_job = False
            if job == "sweep":
                await self._sweep(target, info)
            elif job == "probe":
                await self._probe()
        finally:
            self._busy = False
            # stopped (quit, SIGHUP) in the middle of a job: the session was interrupted
            self._interrupted_job = self._stopping.is_set()

    async def _sweep(self, target: Any, info: Any) -> None:
        from engine.load.sweep import run_sweep

        self._sweep_stop = asyncio.Event()
        self._cancelled = False
        if self._stopping.is_set():
            return
        if target is None:  # a probe-only session: Triton starts with the first sweep asked for
            if self._late_target is None:
                self._late_target = await self._start_server()
            target, info = self._late_target
        self._publish(ev.PhaseChanged(phase="sweep", detail=f"{self.profile.load.mode} sweep on {target.model}"))
        gpus = self._server.prepared.gpus if self._server is not None and self._server.prepared else ()
        watcher = asyncio.create_task(self._watch_http_threads(target))
        try:
            results = await run_sweep(target, info, self.profile.load, self._sweep_publish, self._sweep_stop,
                                      more_levels=self.options.more_levels, gpus=tuple(gpus))
        finally:
            watcher.cancel()
            self._http_threads = None
        load = self.profile.load
        planned = len(mode_of(load.mode).levels(load))
        self._planned_levels += max(planned, len(results))
        cut_short = len(results) < planned or any(r.status == "interrupted" for r in results)
        asked = self._stopping.is_set() or self._cancelled
        if cut_short and not asked and load.on_level_failure != "stop" and not self._incomplete:
            self._incomplete = f"the sweep ended after {len(results)} of {planned} levels"
        if self.profile.load.on_level_failure == "stop" and any(r.status == "failed" for r in results):
            self._publish(ev.Warning(source="session", message="a level failed and load.on_level_failure = 'stop'"))
        if load.wire_check and results and not (self._stopping.is_set() or self._cancelled or self._server_lost):
            await self._wire_check(target, info, results, tuple(gpus))

    async def _wire_check(self, target: Any, info: Any, results: list[ev.LevelResult], gpus: tuple[int, ...]) -> None:
        """The wire's ceiling: the sweep's levels against the no-compute `wire` model, sending
        this model's bytes per item with the same transport and batch size. A server without
        `wire`, or a wire that cannot take the request, is one warning line, not a failed run."""
        from engine.analysis.wire import assess, level_text, wire_ceiling, wire_elements
        from engine.format import body_size
        from engine.load.request import request_inputs
        from engine.load.sweep import run_sweep
        from engine.load.target import Target, describe_target

        load = self.profile.load
        if target.model == WIRE_MODEL:
            self._wire_skipped("the model under test is the wire model itself")
            return
        _shapes, tensors, _ = request_inputs(target, info, 1, load.data)
        bytes_per_item = sum(len(blob) for _t, blob in tensors)
        if load.input_data:  # the data's bytes per item (its mean over the entries), not random tensors'
            from engine.load.input_data import read_input_data
            from engine.load.request_set import data_requests

            data = await asyncio.to_thread(read_input_data, load.input_data, info, target.input_shapes)
            sizes = [sum(len(blob) for _t, blob in r.tensors) for r in data_requests(target, info, 1, data)]
            bytes_per_item = sum(sizes) // len(sizes)
        approximated = not (len(tensors) == 1 and tensors[0][0].get("datatype") == "FP32")
        wire_target = Target(http_url=target.http_url, model=WIRE_MODEL, headers=dict(target.headers),
                             input_shapes={"INPUT0": [wire_elements(bytes_per_item)]})
        try:
            wire_info = await describe_target(wire_target)
            if [(t.get("name"), t.get("datatype")) for t in wire_info.inputs] != [("INPUT0", "FP32")]:
                raise UserError(f"model {WIRE_MODEL!r} on this server does not take one FP32 input INPUT0")
            check_input_shapes(wire_target.input_shapes, wire_info)
        except UserError as exc:
            self._wire_skipped(f"{exc} (the server needs model_repository/embedded/wire served as {WIRE_MODEL!r})")
            return
        size = body_size(bytes_per_item * load.batch_size)
        self._publish(ev.PhaseChanged(phase="wire check", detail=(
            f"the request path alone: the sweep's levels against {WIRE_MODEL!r} with {size} per request "
            f"over {load.transport}")))

        def publish(event: ev.Event) -> None:
            # the wire's levels are not the model's: they stay out of the sweep's tables and
            # summaries, and reach the recording as one WireCeiling event
            if isinstance(event, ev.LevelStarted):
                self._publish(ev.PhaseChanged(phase="wire check", detail=(
                    f"level {event.index + 1}/{event.total}: {level_text(event.mode, event.level)}")))
            elif isinstance(event, ev.Warning):
                self._publish(replace(event, source="wire", message=f"wire check: {event.message}",
                                      key=f"wire-{event.key}" if event.key else ""))
            elif isinstance(event, ev.Error):
                self._publish(replace(event, source="wire", message=f"wire check: {event.message}"))

        try:
            wire_results = await run_sweep(wire_target, wire_info, replace(load, input_shapes=wire_target.input_shapes,
                                                                          input_data=""),
                                           publish, self._sweep_stop or asyncio.Event(), gpus=gpus)
        except UserError as exc:  # e.g. a batch size beyond the wire's max_batch_size
            self._wire_skipped(str(exc))
            return
        if not wire_results:
            return
        wire = wire_ceiling(target.model, load.transport, load.batch_size, bytes_per_item, approximated,
                            wire_results, mode=load.mode, wire_model=WIRE_MODEL)
        self._publish(wire)
        found = assess(wire, results, getattr(info, "model_config", {}) or {}, len(gpus) or None)
        self._publish(ev.PhaseChanged(phase="wire check done", detail=found.line))

    def _wire_skipped(self, why: str) -> None:
        """The wire check was asked for and not done: a warning now, and the run is not "ok"."""
        self._publish(ev.Warning(source="wire", key="wire-skipped", message=f"wire check skipped: {why}"))
        if not self._incomplete:
            self._incomplete = f"wire check skipped: {why}"

    async def _probe(self) -> None:
        if missing := missing_extra("probe", "the training probe"):  # asked for in the TUI
            self._publish(ev.Warning(source="probe", key="probe-extra", message=missing))
            return
        from engine.probe.orchestrate import run_allreduce_sweep, run_probe

        settings = self.profile.probe
        self._probe_stop.clear()
        if self._stopping.is_set():
            return
        self._publish(ev.PhaseChanged(phase="probe", detail="training probe"))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, lambda: run_probe(settings, self._publish, self._probe_stop))
        if settings.allreduce:
            for world_size in sorted({w for w in settings.world_sizes if w > 1}):
                if self._probe_stop.is_set():
                    break
                self._publish(ev.PhaseChanged(phase="all-reduce", detail=f"{world_size} ranks"))
                await loop.run_in_executor(
                    None,
                    functools.partial(
                        run_allreduce_sweep, world_size, self._publish, self._probe_stop, max_bytes=settings.allreduce_max_bytes
                    ),
                )

    # ----------------------------------------------------------------- shutdown

    async def _shutdown(self) -> None:
        if self._telemetry is not None:
            try:
                self._telemetry.stop()
            except Exception as exc:
                self._publish(ev.Warning(source="telemetry", message=f"telemetry did not stop cleanly: {exc!r}"))
        if self._server is not None:
            server, self._server = self._server, None  # the watcher knows: stopped by us
            await asyncio.get_running_loop().run_in_executor(None, server.stop)
            self._publish(ev.ServerStopped(reason="session ended"))
            if server.left_behind:  # e.g. a stub stuck in the driver: it may still hold GPU memory
                self._publish(ev.Warning(source="server", key="left-behind", message=(
                    f"still alive after the server's stop: {', '.join(server.left_behind)}")))
