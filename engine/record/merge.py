"""Recordings of one plan run on several load hosts at one wall-clock instant, as one recording.

Each host drove the same server with the plan's load; together they drove N times it. The merged
recording's levels are the hosts' together (N hosts at concurrency c: level N x c, rate mode
likewise), its windows paired by their place in the level and spanning the hosts' wall-clock
spans, its throughput and errors the hosts' sums, and its latency percentiles read from the sum
of the hosts' histograms (engine/analysis/latency_merge.py: within the histogram's stated error
of the exact percentiles of every sample). Triton's statistics, the GPU and host telemetry and
the path measurements are the first host's (each host read the same server). A level whose hosts
measured it more than a window apart is marked degraded, as a level that reached part of its
servers is: no decision rests on it.

A level one host measured again (a trial 2, 3, ...) and another did not is merged from each
host's kept trial: the last it published, the one its own answer stands on. The hosts ran their
trials at different instants, so such a level, and every later one the re-measuring put out of
step, is degraded by the rule above unless the kept trials still began within a window.
The same session twice (one path given twice, or a copy under another name) is refused: it would
count one host's load as two.

``merge_events`` is pure (decoded events in, events out); ``merge_recordings`` checks that the
recordings are apples to apples and writes the result with the recorder.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from engine.analysis.answer import is_sound
from engine.analysis.latency_merge import NoHistogram
from engine.analysis.saturation import saturation_point
from engine.errors import RunFailed, UserError
from engine.events import (
    Error,
    Event,
    LatencyStats,
    LevelResult,
    LevelStarted,
    MergedSource,
    SessionEnded,
    SessionStarted,
    SessionStatus,
    SweepFinished,
    Warning,
    WindowResult,
    WireCeiling,
)
from engine.modes import mode_of
from engine.profiles import recorded_profile
from engine.record.merge_fold import LevelBlock, merged_result, merged_window
from engine.record.tell_apart import config_leaves, unique_names

_SESSION_RANK: dict[str, int] = {"ok": 0, "interrupted": 1, "failed": 2}
# per host, only these reach the merged recording from hosts after the first (named by host)
_NOTICE_KINDS = (Warning, Error)


class MergeRefused(UserError):
    """Recordings that are not one plan run together: one line, exit 2."""


@dataclass
class HostRun:
    """One host's recording, decoded: its events in order and its level blocks."""

    name: str  # the host's name (its recording's hostname), unique among the sources
    file: str
    events: list[Event]
    started: SessionStarted
    blocks: list[LevelBlock] = field(default_factory=list)  # every trial, in order
    ended: SessionEnded | None = None
    # each level's kept trial (the last with a result, as the host's answer keeps), in the order
    # the levels first began
    kept: list[LevelBlock] = field(default_factory=list)


def host_run(name: str, file: str, events: Sequence[Event]) -> HostRun:
    """A host's events as level blocks; MergeRefused for a recording that has no session start."""
    started = next((e for e in events if isinstance(e, SessionStarted)), None)
    if started is None:
        raise MergeRefused(f"{file}: no session start recorded: not a whole recording")
    run = HostRun(name, file, list(events), started)
    for e in events:
        if isinstance(e, LevelStarted):
            run.blocks.append(LevelBlock(e))
        elif isinstance(e, WindowResult) and run.blocks:
            run.blocks[-1].windows.append(e)
        elif isinstance(e, LevelResult) and run.blocks:
            run.blocks[-1].result = e
        elif isinstance(e, SessionEnded):
            run.ended = e
    kept: dict[tuple[int, float, bool], LevelBlock] = {}
    for b in run.blocks:  # a later trial replaces an earlier one in the earlier one's place
        if b.level_key not in kept or b.result is not None or kept[b.level_key].result is None:
            kept[b.level_key] = b
    run.kept = list(kept.values())
    return run


# ---------------------------------------------------------------------------- checks


def check_runs(runs: Sequence[HostRun], window_s: float) -> None:
    """MergeRefused unless the runs ran the same levels in the same order, kept histograms, and
    began within a window of each other (one plan, one instant)."""
    if len(runs) < 2:
        raise MergeRefused(f"merge needs two or more recordings, got {len(runs)}")
    for run in runs:
        if not any(b.result is not None for b in run.blocks):
            raise MergeRefused(f"{run.file}: no level measured: nothing to merge")
        if _without_histogram(run):
            raise MergeRefused(f"{run.file}: recorded without latency histograms (by a version before they were "
                               "kept): its percentiles cannot be merged")
    first = runs[0]
    for run in runs[1:]:
        if [b.level_key for b in run.kept] != [b.level_key for b in first.kept]:
            raise MergeRefused(
                f"the hosts ran different levels: {_levels_text(first)} ({first.name}) against {_levels_text(run)} "
                f"({run.name}): a latency-target search decides its levels per host, and a host stopped early "
                "measured fewer; run the plan to its end on every host, with no load.slo_ms")
    starts = {run.name: _first_window(run) for run in runs}
    known = {k: v for k, v in starts.items() if v is not None}
    if known:
        early, late = min(known, key=known.__getitem__), max(known, key=known.__getitem__)
        skew = known[late] - known[early]
        if skew > window_s:
            raise MergeRefused(f"{late} began measuring {skew:.1f} s after {early}, more than a window "
                               f"({window_s:g} s): start the hosts at one wall-clock instant")


def refuse_same_session(ids: Sequence[str], digests: Sequence[str], files: Sequence[str]) -> None:
    """MergeRefused when two of the recordings are one session: the same session id (one path
    twice, or a byte copy under another name) or the same recorded events under another id."""
    for j in range(len(files)):
        for i in range(j):
            if ids[i] and ids[i] == ids[j]:
                twice = "given twice" if files[i] == files[j] else f"{files[i]} and {files[j]}"
                raise MergeRefused(f"session {ids[i]} is in the recordings twice ({twice}): one host's run would "
                                   "count as two; give each host's recording once")
            if digests[i] == digests[j]:
                raise MergeRefused(f"{files[i]} and {files[j]} recorded the same events (sessions {ids[i]} and "
                                   f"{ids[j]}): one host's run would count as two; give each host's recording once")


def shown_names(paths: Sequence[Path]) -> list[str]:
    """Each recording's file name, or its whole path where another file has that name (a copy in
    another folder, caught by a glob): one file given twice reads the same, two files never do."""
    names = [p.name for p in paths]
    resolved = [p.resolve() for p in paths]
    return [str(resolved[i]) if any(names[j] == names[i] and resolved[j] != resolved[i] for j in range(len(paths)))
            else names[i] for i in range(len(paths))]


def events_digest(rows: Iterable[tuple[int, float, str, str]]) -> str:
    """A recording's events, less its session start (where a copy's id could be changed), as one hash."""
    h = hashlib.sha256()
    for _seq, ts, kind, data in rows:
        if kind != SessionStarted.kind:
            h.update(f"{ts!r}\0{kind}\0{data}\n".encode())
    return h.hexdigest()


def _without_histogram(run: HostRun) -> bool:
    def bare(lat: LatencyStats | None) -> bool:
        return lat is not None and lat.count > 0 and lat.histogram is None

    for b in run.blocks:
        if any(bare(w.latency) for w in b.windows) or (b.result is not None and bare(b.result.latency)):
            return True
    return False


def _levels_text(run: HostRun) -> str:
    parts = [f"{b.start.level:g}" + (" (search)" if b.start.slo_search else "") for b in run.kept]
    return ", ".join(parts) or "none"


def kept_trials(runs: Sequence[HostRun]) -> str:
    """One line naming the levels whose hosts kept different trials, and the rule; "" when none did."""
    parts = []
    for i, b in enumerate(runs[0].kept):
        trials = [run.kept[i].start.trial for run in runs]
        if len(set(trials)) > 1:
            each = ", ".join(f"{run.name} trial {t}" for run, t in zip(runs, trials, strict=True))
            parts.append(f"level {b.start.level * len(runs):g} ({each})")
    if not parts:
        return ""
    return ("levels measured again on some hosts are merged from each host's kept trial (its last, the one its "
            "own answer stands on); one whose kept trials began more than a window apart is degraded: "
            + "; ".join(parts))


def _first_window(run: HostRun) -> float | None:
    return next((w.t_start for b in run.blocks for w in b.windows), None)


def _scaled_profile(profile: dict[str, Any], scale: int) -> dict[str, Any]:
    """The plan as the hosts ran it together: each planned level times the hosts."""
    out = dict(profile)
    load = dict(out.get("load") or {})
    key = mode_of(recorded_profile(profile).load.mode).levels_key
    values = load.get(key)
    if isinstance(values, list):
        load[key] = [v * scale if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in values]
    elif isinstance(values, (int, float)) and not isinstance(values, bool):
        load[key] = values * scale
    out["load"] = load
    return out


def _session_start(runs: Sequence[HostRun], scale: int) -> SessionStarted:
    first = runs[0].started
    starts = {run.name: _first_window(run) for run in runs}
    earliest = min((t for t in starts.values() if t is not None), default=0.0)
    sources = [MergedSource(hostname=run.name, file=run.file, session_id=run.started.session_id,
                            offset_s=round((starts[run.name] or earliest) - earliest, 6)) for run in runs]
    host = dict(first.host)
    host["hostname"] = " + ".join(run.name for run in runs)
    return msgspec.structs.replace(first, session_id=uuid.uuid4().hex, profile=_scaled_profile(first.profile, scale), host=host,
                   merged_from=sources)


def _session_end(runs: Sequence[HostRun], results: Sequence[LevelResult], ts: float) -> SessionEnded:
    """The worst host's ending; a level out of step or degraded fails the merged run, as a
    degraded level fails a live one."""
    ends = [(run.ended, run.name) for run in runs]
    missing = [name for end, name in ends if end is None]
    worst: SessionStatus = "ok"
    errors = []
    for end, name in ends:
        if end is None:
            continue
        if _SESSION_RANK.get(end.status, 0) > _SESSION_RANK[worst]:
            worst = end.status
        if end.error:
            errors.append(f"{name}: {end.error}")
    if missing:
        worst = "failed"
        errors.append(f"no session end recorded by {', '.join(missing)}")
    degraded = [r for r in results if r.degraded]
    if degraded and worst == "ok":
        worst = "failed"
        errors.append(f"{len(degraded)} level(s) degraded: " + "; ".join(f"{r.level:g}: {r.degraded}" for r in degraded))
    exit_code = max((end.exit_code for end, _n in ends if end is not None), default=1)
    if worst != "ok" and exit_code == 0:
        exit_code = 1
    return SessionEnded(ts=ts, status=worst, error="; ".join(errors) or None, exit_code=exit_code)


def merge_events(runs: Sequence[HostRun], window_s: float) -> list[Event]:
    """The merged recording's events: the first host's stream, with its levels, windows and
    results replaced by every host's together, the other hosts' warnings and errors (named by
    host) in time order, and a session start naming every source. ``check_runs`` first."""
    names = [run.name for run in runs]
    scale = len(runs)
    first = runs[0]
    # only the first host's kept trials place the merged levels; its superseded trials are left out
    block_of = {id(b.start): i for i, b in enumerate(first.kept)}
    window_at = {id(w): (i, k) for i, b in enumerate(first.kept) for k, w in enumerate(b.windows)}
    result_of = {id(b.result): i for i, b in enumerate(first.kept) if b.result is not None}
    superseded = {id(e) for b in first.blocks if id(b.start) not in block_of
                  for e in [b.start, *b.windows, *([b.result] if b.result is not None else [])]}
    out: list[Event] = []
    results: list[LevelResult] = []
    for e in first.events:
        if isinstance(e, SessionStarted):
            out.append(_session_start(runs, scale))
        elif id(e) in superseded:
            continue
        elif isinstance(e, LevelStarted):
            i = block_of[id(e)]
            out.append(msgspec.structs.replace(e, level=e.level * scale, workers=sum(run.kept[i].start.workers for run in runs),
                               trial=max(run.kept[i].start.trial for run in runs)))
        elif isinstance(e, WindowResult) and id(e) in window_at:
            i, k = window_at[id(e)]
            each = [run.kept[i].windows[k] for run in runs if k < len(run.kept[i].windows)]
            if len(each) < len(runs):
                continue
            out.append(merged_window(each, names, scale))
        elif isinstance(e, LevelResult) and id(e) in result_of:
            i = result_of[id(e)]
            blocks = [run.kept[i] for run in runs]
            if any(b.result is None for b in blocks):
                missing = [n for b, n in zip(blocks, names, strict=True) if b.result is None]
                out.append(Warning(ts=e.ts, source="merge", key=f"merge-missing-{i}",
                                   message=f"level {e.level * scale:g}: no result from {', '.join(missing)}: left out"))
                continue
            result = merged_result(blocks, names, scale, window_s)
            results.append(result)
            out.append(result)
        elif isinstance(e, SweepFinished):
            out.append(_sweep_finished(e, results))
        elif isinstance(e, SessionEnded):
            out.append(_session_end(runs, results, e.ts))
        elif isinstance(e, WireCeiling):
            continue  # a wire check measured one host's path: not the hosts' together
        elif isinstance(e, (Warning, Error)):
            out.append(_named(e, first.name))
        else:
            out.append(e)
    left_out = sum(len(run.kept[i].windows) - min(len(r.kept[i].windows) for r in runs)
                   for i in range(len(first.kept)) for run in runs)
    if left_out:
        out.insert(1, Warning(ts=out[0].ts, source="merge", key="merge-windows", message=(
            f"{left_out} window(s) had no counterpart on every host and are left out of the timeline (each level's "
            "figures still count every host's merged windows)")))
    if trials := kept_trials(runs):
        out.insert(1, Warning(ts=out[0].ts, source="merge", key="merge-trials", message=trials))
    out.insert(1, Warning(ts=out[0].ts, source="merge", key="merge-sources", message=(
        f"merged from {len(runs)} load hosts ({', '.join(names)}): levels are their sum, the server's statistics, "
        f"GPU and host telemetry are {first.name}'s")))
    if not any(isinstance(e, SessionEnded) for e in first.events):
        out.append(_session_end(runs, results, out[-1].ts))
    return _with_notices(out, runs[1:])


def _sweep_finished(e: SweepFinished, results: Sequence[LevelResult]) -> SweepFinished:
    found = saturation_point([(r.level, r.throughput_rps) for r in results
                              if is_sound(r) and not r.audit.client_bound and not r.degraded])
    return msgspec.structs.replace(e, levels=len(results), stable=sum(1 for r in results if r.status == "stable"),
                   failed=sum(1 for r in results if r.status == "failed"),
                   saturation_level=found.level if found else None,
                   degraded=sum(1 for r in results if r.degraded))


def _named(e: Warning | Error, host: str) -> Warning | Error:
    """A host's warning or error, saying whose (each host's shown once, not one for all)."""
    if isinstance(e, Warning):
        return msgspec.structs.replace(e, message=f"{host}: {e.message}", key=f"{host}: {e.key}" if e.key else "")
    return msgspec.structs.replace(e, message=f"{host}: {e.message}")


def _with_notices(out: list[Event], others: Sequence[HostRun]) -> list[Event]:
    """The other hosts' warnings and errors, named by host, each after the last event not later
    than it (the stream stays in publication order)."""
    notices = sorted(((e.ts, _named(e, run.name)) for run in others
                      for e in run.events if isinstance(e, _NOTICE_KINDS)), key=lambda p: p[0])
    if not notices:
        return out
    merged: list[Event] = []
    j = 0
    for e in out:
        while j < len(notices) and notices[j][0] < e.ts and merged:
            merged.append(notices[j][1])
            j += 1
        merged.append(e)
    tail = [n for _t, n in notices[j:]]
    if tail and isinstance(merged[-1], SessionEnded):  # the session's end stays last
        return merged[:-1] + tail + merged[-1:]
    return merged + tail


# ---------------------------------------------------------------------------- apples to apples


def _refuse_differences(summaries: Sequence[Any], labels: Sequence[str]) -> None:
    """What compare calls a mismatch, and what makes sums of hosts meaningless, refused."""
    checks: list[tuple[str, Callable[[Any], Any]]] = [
        ("model", lambda s: s.model),
        ("batch size", lambda s: s.batch_size),
        ("load mode", lambda s: s.load_mode),
        ("transport", lambda s: s.transport),
        ("planned levels", lambda s: tuple(s.levels_planned)),
        ("model inputs", lambda s: repr(s.server.get("inputs"))),
        ("input data", lambda s: s.inputs_key),
        ("load.window_ms", lambda s: _load(s).get("window_ms")),
    ]
    for what, get in checks:
        values = [get(s) for s in summaries]
        if len({repr(v) for v in values}) > 1:
            shown = "; ".join(f"{_shown(v)} ({label})" for v, label in zip(values, labels, strict=True))
            raise MergeRefused(f"{what} differs: {shown}: not one plan, not merged")
    configs = [config_leaves(s.model_config) for s in summaries]
    for key in sorted({k for c in configs for k in c}):
        values = [c.get(key, "not set") for c in configs]
        if len(set(values)) > 1:
            shown = "; ".join(f"{v} ({label})" for v, label in zip(values, labels, strict=True))
            raise MergeRefused(f"model config differs in {key}: {shown}: not one plan, not merged")


def _load(summary: Any) -> dict[str, Any]:
    return (summary.metadata.get("profile") or {}).get("load") or {}


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) or "none"
    return str(value)


def merge_recordings(paths: Sequence[Path], out: Path) -> tuple[Path, int, list[str]]:
    """Merge the recordings at ``paths`` into a new recording ``out``; returns (path, levels
    merged, the hosts' names). UserError (one line, exit 2) for a bad or mismatched input."""
    from engine.record.reader import Recording
    from engine.record.recorder import Recorder

    if len(paths) < 2:
        raise MergeRefused(f"merge needs two or more recordings, got {len(paths)}")
    if out.exists() or out.is_symlink():
        raise UserError(f"-o {out}: already exists; a recording is never written over")
    folder = next((p for p in out.parents if p.exists()), Path("."))
    if not folder.is_dir():
        raise UserError(f"-o {out}: cannot create the recording there: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"-o {out}: cannot create the recording there: {folder} is not writable")
    recordings = [Recording.open(p) for p in paths]
    try:
        refuse_same_session([str(r.metadata.get("session_id") or "") for r in recordings],
                            [events_digest(r.raw_rows()) for r in recordings], shown_names([r.path for r in recordings]))
        summaries = [r.summary() for r in recordings]
        hosts = unique_names([str(s.host.get("hostname") or Path(s.path).stem) for s in summaries])
        _refuse_differences(summaries, [f"{h}, {Path(s.path).name}" for h, s in zip(hosts, summaries, strict=True)])
        runs = [host_run(h, r.path.name, list(r.events())) for h, r in zip(hosts, recordings, strict=True)]
    finally:
        for r in recordings:
            r.close()
    window_s = recorded_profile(runs[0].started.profile).load.window_ms / 1000
    check_runs(runs, window_s)
    try:
        events = merge_events(runs, window_s)
    except NoHistogram as exc:
        raise MergeRefused(f"merge: {exc}") from None
    except ValueError as exc:  # a histogram this version cannot read
        raise MergeRefused(f"merge: a recorded latency histogram is unreadable: {exc}") from None
    recorder = Recorder(out)
    for e in events:
        recorder(e)
    recorder.close()
    if recorder.error is not None:
        raise RunFailed(f"{out}: the merged recording could not be written: {recorder.error}")
    return out, sum(1 for e in events if isinstance(e, LevelResult)), hosts


__all__ = ["HostRun", "LevelBlock", "MergeRefused", "check_runs", "events_digest", "host_run", "kept_trials",
           "merge_events", "merge_recordings", "refuse_same_session", "shown_names"]
