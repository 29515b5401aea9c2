"""The study source: the same sweep on each config variant in turn, one Session per variant.

Per variant: the embedded server is started with that variant (each Session starts and stops its
own server, so every variant gets a fresh one, and stop() returns once the previous one and its
stubs are gone); a remote Triton with model control loads the
variant's instance groups through the repository API; a remote one without it is asked for by a
person (``ask``). Each Session's events are forwarded to the study's bus, with the study's own
events (StudyStarted, StudyVariantStarted/Finished, StudyFinished) around them; each Session
records itself; the index file is rewritten after each variant.

The box check runs once, in the first variant's session (before its server starts): the box does
not change between variants, and the check costs 15-35 s on a GPU box. The later sessions record
that same result (marked as the study's, ``BoxCheck.reused``), so each variant's recording, replay
and report still carry the check.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from engine import events as ev
from engine.analysis.answer import slo_measured
from engine.analysis.scale_out import one_line
from engine.analysis.slo import DEFAULT_SEARCH_STEPS, Slo, next_search_level
from engine.bus import EventBus
from engine.errors import RunFailed, UserError
from engine.modes import mode_of
from engine.outcome import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_GATES, EXIT_INTERRUPTED, EXIT_OK
from engine.profiles import Model, Profile, headers_for, scale_out_parts
from engine.record.naming import name_slug, utc_stamp
from engine.server.fleet import visible_gpus
from engine.server.serve_command import ServedConfig, ServeFailed, shown_template
from engine.session import Session, SessionOptions
from engine.source import EventSource
from engine.study.figures import end_lines
from engine.study.index import INDEX_SUFFIX, StudyIndex, VariantRun, write_index
from engine.study.model_control import (
    NoModelControl,
    check_model_control,
    load_variant,
    variant_sources,
)
from engine.study.serve_configs import Serve, serve_configs, where_it_runs
from engine.study.variants import (
    is_gpu_variant,
    plan_variants,
    refuse_scale_out_remote,
    scale_out_variant,
    variant_order,
    variant_units,
)

Ask = Callable[[str], bool]  # shows a request to a person, True when they are ready, False to stop

EMBEDDED, REMOTE_CONTROL, REMOTE_MANUAL = "embedded", "remote (model control)", "remote (manual)"
SERVE = "served (--serve)"  # the LLM serving study: the user's OpenAI-compatible server, started per config
WATCH_S = 0.5  # how often a served config's servers are looked at while it is measured


def search_for(slo: Slo, mode: str, max_steps: int) -> Callable[[list[ev.LevelResult]], float | None]:
    """The sweep's more_levels hook: the next level of the latency-target search."""

    def more(results: list[ev.LevelResult]) -> float | None:
        points = slo_measured(results, slo)  # the sound levels (and failed ones): noise steers no search
        return next_search_level(points, slo.target_s, integer=mode_of(mode).integer_levels,
                                 steps_done=sum(1 for r in results if r.slo_search), max_steps=max_steps)

    return more


def study_exit_code(codes: list[int], interrupted: bool) -> int:
    """The study's exit code from its variants' (bad input of a config the tool built is already
    counted as failed: ``variant_exit_code``)."""
    if interrupted or EXIT_INTERRUPTED in codes:
        return EXIT_INTERRUPTED
    for code in (EXIT_BAD_INPUT, EXIT_FAILED, EXIT_GATES):
        if code in codes:
            return code
    return EXIT_OK


def variant_exit_code(code: int, built: bool) -> int:
    """A variant's exit code as the study counts it: bad input (2) is the user's only where the
    user gave it; a config the tool built (``built``: the scale-out config --scale-out adds, or a
    variant after one whose input was accepted) that is refused, e.g. by the apples-to-apples
    check, is the study failing (1)."""
    return EXIT_FAILED if code == EXIT_BAD_INPUT and built else code


def _status_of(exit_code: int) -> ev.SessionStatus:
    """A session's or the study's status from its exit code (bad input, gates: failed)."""
    return "ok" if exit_code == EXIT_OK else "interrupted" if exit_code == EXIT_INTERRUPTED else "failed"

class StudySource(EventSource):
    def __init__(self, profile: Profile, variants: list[str] | None, *, slo: Slo | None = None,
                 record_dir: Path = Path("recordings"), gpu_count: int | None = None,
                 search_steps: int = DEFAULT_SEARCH_STEPS, costs: dict[int, float] | None = None,
                 ask: Ask | None = None, bus: EventBus | None = None, scale_out: bool = False,
                 scale_out_price: tuple[float, str] | None = None, serve: Serve | None = None) -> None:
        super().__init__(bus)
        self.serve = serve  # the LLM serving study: start the user's server per config
        self._served: ServedConfig | None = None  # the config's servers while it is measured
        self.serve_log_dir: Path | None = None
        self.scale_out = scale_out  # add the scale-out config (1x*N, or cpu*2) to the planned ones
        self.added: str | None = None  # the config --scale-out added
        self.scale_out_price = scale_out_price  # a one-GPU box's $/hr, and where it is from
        self.profile = profile
        self.requested = variants
        self.slo = slo
        self.record_dir = Path(record_dir)
        self.gpu_count = gpu_count
        self.search_steps = search_steps if slo else 0
        self.costs = costs or {}
        self.ask = ask
        self.variants: list[str] = []
        self.server_kind = EMBEDDED
        self.sources: dict[str, Path] = {}
        self.index: StudyIndex | None = None
        self.index_path: Path | None = None
        self.error: str | None = None
        self._stopping = threading.Event()
        self._session: Session | None = None
        self._lock = threading.Lock()
        self.box_check: ev.BoxCheck | None = None  # the study's one check, from the first session
        self._check_tried = False  # a session has had its go at the check (it may not have given one)

    # ----------------------------------------------------------------- before start

    def prepare(self) -> None:
        """Every check that can fail on bad input, before any load: raises UserError."""
        model = self.profile.model.name
        if self.serve is not None and model == Model().name:  # not named: the server's first model is measured
            model = "llm"
        server = self.profile.server
        if self.serve is not None:
            self._prepare_serve()
        elif server.kind == "remote":
            refuse_scale_out_remote(self.requested)
            if self.scale_out:
                raise UserError("--scale-out starts embedded servers; for several remote servers, list them in "
                                "server.urls")
            self.sources = variant_sources(model)
            if not self.sources:
                raise UserError(f"no config variants for model {model!r} under model_repository/ "
                                "(expected config.pbtxt, config.multigpu.Nx.pbtxt ...)")
            gpus = self.profile.hardware.gpu_count
            self.variants = plan_variants(model, self.requested, gpus, self.sources, gpus_known=gpus > 0)
            # several servers (server.urls): each loads every variant
            lacking = [url for url in server.endpoint_urls() if not check_model_control(url, model, headers_for(server, url))]
            if not lacking:
                self.server_kind = REMOTE_CONTROL
            elif self.ask is None:
                raise UserError(f"server {lacking[0]} has no model control (start Triton with "
                                "--model-control-mode=explicit) and there is no terminal to wait on while you "
                                "load each config")
            else:
                self.server_kind = REMOTE_MANUAL
        else:
            if self.gpu_count is None:
                from engine.server.gpus import visible_gpu_count

                self.gpu_count = visible_gpu_count()
            self.variants = plan_variants(model, self.requested, self.gpu_count)
            if self.scale_out:
                added = scale_out_variant(self.variants, self.gpu_count)
                plan_variants(model, [added], self.gpu_count, gpus_known=False)  # its config exists
                if added not in self.variants:
                    self.added = added
                    self.variants = sorted([*self.variants, added], key=variant_order)
        if self.costs and not any(is_gpu_variant(v) for v in self.variants):
            given = " ".join(f"--cost {k}={v:g}" for k, v in self.costs.items())
            raise UserError(f"{given}: prices a box by its GPUs, and this study's configs ({', '.join(self.variants)}) "
                            "run on the CPU of one box: set hardware.cost_per_hour in the profile (or "
                            "--set hardware.cost_per_hour=DOLLARS) for that box's price")
        self.record_dir.mkdir(parents=True, exist_ok=True)
        stamp = utc_stamp(datetime.now(UTC))
        stem = f"study_{name_slug(model)}_{name_slug(self.profile.name)}_{stamp}"
        path = self.record_dir / f"{stem}{INDEX_SUFFIX}"
        n = 2
        while path.exists():
            path = self.record_dir / f"{stem}_{n}{INDEX_SUFFIX}"
            n += 1
        self.index_path = path
        if self.serve is not None:  # each server's log, kept beside the recordings
            self.serve_log_dir = self.record_dir / path.name.replace(INDEX_SUFFIX, "_serve_logs")
        self.index = StudyIndex(
            study_id=uuid.uuid4().hex[:12], profile=self.profile.name, model=model, variants=list(self.variants),
            server=self.server_kind, slo=str(self.slo) if self.slo else None, search_steps=self.search_steps,
            costs={str(k): v for k, v in self.costs.items()}, started=time.time(),
            scale_out_price=self.scale_out_price[0] if self.scale_out_price else None,
            scale_out_price_from=self.scale_out_price[1] if self.scale_out_price else "",
            serve=shown_template(self.serve.template) if self.serve else "",
        )
        write_index(self.index, self.index_path)

    def _prepare_serve(self) -> None:
        assert self.serve is not None
        if self.gpu_count is None:
            from engine.server.gpus import visible_gpu_count

            self.gpu_count = visible_gpu_count()
        if self.scale_out:
            raise UserError("--scale-out adds a Triton config; with --serve the replicas config 1*N is in the "
                            "default plan (or name it in --variants)")
        self.variants = serve_configs(self.requested, self.gpu_count, self.serve.units)
        self.server_kind = SERVE

    # ----------------------------------------------------------------- control

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            session = self._session
        if session is not None:
            session.stop()

    # ----------------------------------------------------------------- run

    def _run(self) -> None:
        try:
            self._study()
        except BaseException as exc:  # the thread must never die silently
            self.exit_code = EXIT_FAILED
            self.error = f"internal error: {exc!r}"
            self.bus.publish(ev.Error(source="study", message=self.error, fatal=True))
        finally:
            self._stop_served()  # no server of ours outlives the study

    def _study(self) -> None:
        if self.index is None:
            self.prepare()
        assert self.index is not None and self.index_path is not None
        load = self.profile.load
        self.bus.publish(ev.StudyStarted(
            study_id=self.index.study_id, model=self.index.model, variants=list(self.variants),
            levels=[float(x) for x in mode_of(load.mode).levels(load)],
            mode=load.mode, server=self.server_kind, slo=self.index.slo, search_steps=self.search_steps,
            index_path=str(self.index_path),
        ))
        codes: list[int] = []
        accepted = False  # a variant got past the input checks: the profile and flags are good
        for position, variant in enumerate(self.variants):
            if self._stopping.is_set():
                break
            how = self._put_in_place(variant)
            if how is None:  # stopped while waiting, or the load failed
                if not self._stopping.is_set():
                    codes.append(EXIT_FAILED)
                    continue
                break
            self.bus.publish(ev.StudyVariantStarted(variant=variant, position=position, how=how))
            code = self._run_variant(variant, position, how, built=accepted or variant == self.added)
            accepted = accepted or code != EXIT_BAD_INPUT
            codes.append(code)
            if code in (EXIT_BAD_INPUT, EXIT_INTERRUPTED):
                break  # the next variant would meet the same bad input; an interrupt stops the study
        interrupted = self._stopping.is_set()
        self.exit_code = study_exit_code(codes, interrupted)
        index = self.index
        index.status = _status_of(self.exit_code)
        index.ended = time.time()
        write_index(index, self.index_path)
        if index.missing and self.error is None and self.exit_code != EXIT_OK:
            self.error = f"variants missing from the study: {', '.join(index.missing)}"
        end = end_lines(self.index_path)
        self.bus.publish(ev.StudyFinished(status=index.status, finished=index.finished, missing=index.missing,
                                          index_path=str(self.index_path), exit_code=self.exit_code,
                                          scale_answers=end.scale_answers,
                                          answer=end.answer,
                                          forecast_lines=end.forecasts))

    def _put_in_place(self, variant: str) -> str | None:
        """Make the server serve ``variant``; how it was done, or None when it could not be."""
        if self.server_kind == SERVE:
            return self._start_served(variant)
        if self.server_kind == EMBEDDED:
            if parts := scale_out_parts(variant):
                each = "one per GPU" if parts[0] == "1x" else "on this box"
                return f"{parts[1]} embedded servers of the {parts[0]} config, {each}"
            return "embedded server started with this variant"
        server, model = self.profile.server, self.profile.model.name
        source = self.sources[variant]
        if self.server_kind == REMOTE_CONTROL:
            self.bus.publish(ev.PhaseChanged(phase="loading", detail=f"variant {variant} through the repository API"))
            try:
                for url in server.endpoint_urls():
                    load_variant(url, model, variant, source, headers_for(server, url))
            except (RunFailed, NoModelControl) as exc:
                self._record_missing(variant, EXIT_FAILED, str(exc), "repository API")
                self.bus.publish(ev.Error(source="study", message=f"variant {variant}: {exc}"))
                return None
            return f"loaded through the repository API from {source.name}"
        assert self.ask is not None
        ready = self.ask(f"Load variant {variant} of {model} on {', '.join(server.endpoint_urls())} (its instance groups: {source}), "
                         "then press Enter; Ctrl-C stops the study.")
        return f"loaded by hand ({source.name})" if ready and not self._stopping.is_set() else None

    def _start_served(self, variant: str) -> str | None:
        """The config's servers from the --serve command, each up (/health, /v1/models); how, or
        None (recorded as failed, with the log named) when one did not come up."""
        assert self.serve is not None and self.serve_log_dir is not None
        gpus = visible_gpus(self.gpu_count or 0, os.environ.get("CUDA_VISIBLE_DEVICES")) if self.gpu_count else []
        served = ServedConfig(variant, self.serve.words, gpus, self.serve_log_dir)
        n = len(served.servers)
        own = "GPU and port" if gpus else "port"
        how = (f"{n} servers of --serve with tp=1, each on its own {own}, the load spread over them"
               if n > 1 else f"one server of --serve with tp={variant_units(variant)}")
        how += f"; {where_it_runs(self.gpu_count or 0)}"
        self.bus.publish(ev.PhaseChanged(phase="starting server", detail=f"config {variant}: {how}"))
        try:
            served.start(self.serve.start_budget_s, self._stopping)
        except ServeFailed as exc:
            self._record_missing(variant, EXIT_FAILED, str(exc), how)
            self.bus.publish(ev.Error(source="study", message=f"config {variant}: {exc}"))
            if self.error is None:
                self.error = f"config {variant}: {exc}"
            return None
        if self._stopping.is_set():
            served.stop()
            return None
        self._served = served
        return how

    def _watch_served(self, session: Session, done: threading.Event) -> None:
        """A served config's server that dies while measured ends its session: its figures decide
        nothing (``_run_variant`` records the config failed, naming the server and its log)."""
        served = self._served
        while served is not None and not done.wait(WATCH_S):
            died = served.died()
            if died is not None:
                session.fail("serve", died)  # its recording says why, not "interrupted"
                return

    def _run_variant(self, variant: str, position: int, how: str, built: bool = False) -> int:
        """Run one variant's session; its exit code as the study counts it (``variant_exit_code``)."""
        profile = replace(self.profile, model=replace(self.profile.model, variant=variant),
                          probe=replace(self.profile.probe, enabled=False))
        if self._served is not None:  # the config's own servers, the load spread over them
            urls = self._served.urls
            profile = replace(profile, server=replace(profile.server, kind="remote", url=urls[0],
                                                      urls=urls if len(urls) > 1 else [],
                                                      metrics_url=None, metrics_urls=[]))
        options = SessionOptions(sweep=True, probe=False, record_dir=self.record_dir, gpu_count=self.gpu_count,
                                 more_levels=search_for(self.slo, profile.load.mode, self.search_steps)
                                 if self.slo else None,
                                 check=not self._check_tried or self.box_check is not None, box_check=self.box_check)
        self._check_tried = True
        session = Session(profile, options)

        def keep_check(event: ev.Event) -> None:
            if isinstance(event, ev.BoxCheck) and not event.reused and self.box_check is None:
                self.box_check = msgspec.structs.replace(event, reused=f"the study's check, taken before config {variant}")

        session.bus.subscribe(keep_check)
        session.bus.subscribe(self.bus.publish)
        with self._lock:
            self._session = session
        if self._stopping.is_set():
            self._stop_served()
            return EXIT_INTERRUPTED
        session.start()
        done = threading.Event()
        threading.Thread(target=self._watch_served, args=(session, done), daemon=True, name="serve-watch").start()
        while not session.join(0.5):
            pass
        done.set()
        with self._lock:
            self._session = None
        status = _status_of(session.exit_code)
        code = variant_exit_code(session.exit_code, built)
        died = self._served.died() if self._served is not None else None
        self._stop_served()
        error = session.error
        if died is not None and not self._stopping.is_set():  # a server lost mid-run: the config failed
            status, code, error = "failed", EXIT_FAILED, died
            if self.error is None:
                self.error = f"config {variant}: {died}"
        if code == EXIT_BAD_INPUT and self.error is None:
            self.error = session.error
        elif code == EXIT_FAILED and self.error is None and session.error:
            self.error = f"config {variant}: {one_line(session.error)}"
        assert self.index is not None and self.index_path is not None
        rel = session.recording_path.name if session.recording_path and session.recording_path.exists() else None
        # an interrupted variant's recording is kept, but the variant counts as missing
        # the exit code as the study counts it: a refused config the tool built reads as failed (1)
        self.index.runs.append(VariantRun(variant, rel, status, code, error, how))
        write_index(self.index, self.index_path)
        self.bus.publish(ev.StudyVariantFinished(variant=variant, position=position, status=status,
                                                 exit_code=code, recording=rel, error=error))
        return code

    def _stop_served(self) -> None:
        if self._served is not None:
            self._served.stop()
            self._served = None

    def _record_missing(self, variant: str, code: int, error: str, how: str) -> None:
        assert self.index is not None and self.index_path is not None
        self.index.runs.append(VariantRun(variant, None, "failed", code, error, how))
        write_index(self.index, self.index_path)
