"""`gpuscale-tui merge` over recordings written by the real Recorder from made-up hosts' events
(every latency sample drawn here, so the merged figures are checked against the raw samples):
sums, percentiles within the histogram's error, refusals and bad input (one line, exit 2), and
a merged recording that replays, exports and compares like any other."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.latency_histogram import RELATIVE_ERROR
from engine.analysis.percentiles import PERCENTILES, latency_stats
from engine.events import (
    Event,
    LatencyStats,
    LevelResult,
    LevelStarted,
    ServerReady,
    SessionEnded,
    SessionStarted,
    SweepFinished,
    Warning,
    WindowResult,
)
from engine.profiles import Load, Model, Profile
from engine.record.reader import Recording
from engine.record.replay_source import ReplaySource
from tests.engine.record.synthetic_recordings import record_events
from tests.structs import replace
from tui.cli import main
from tui.describe import describe

T0 = 1_771_169_400.0
WINDOW_S = 1.0


@dataclass
class Host:
    name: str
    seed: int
    offset_s: float = 0.0  # when it began, after T0
    levels: list[int] = field(default_factory=lambda: [2, 4])
    model: str = "vit_tiny"
    transport: str = "http"
    histogram: bool = True
    windows: int = 3
    trials: dict[int, int] = field(default_factory=dict)  # level -> trials it was measured in (1 unless named)
    model_config: dict = field(default_factory=lambda: {"max_batch_size": 8, "dynamic_batching": {}})
    samples: dict[int, np.ndarray] = field(default_factory=dict)  # level -> its merged windows' samples
    window_samples: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)


def host_events(h: Host) -> list[Event]:
    rng = np.random.default_rng(h.seed)
    profile = Profile(name="local", model=Model(name=h.model),
                      load=Load(concurrency=list(h.levels), window_ms=int(WINDOW_S * 1000), transport=h.transport))
    t = T0 + h.offset_s
    events: list[Event] = [
        SessionStarted(ts=t, session_id=f"s-{h.name}", profile_name="local", profile=profile.to_dict(), mode="sweep",
                       host={"hostname": h.name, "cpu_cores": 8}),
        ServerReady(ts=t + 0.1, http_url="http://10.0.0.9:8000", metrics_url=None, embedded=False, model=h.model,
                    model_config=h.model_config,
                    inputs=[{"name": "INPUT0", "datatype": "FP32", "shape": [16]}]),
        Warning(ts=t + 0.2, source="load", message="a warning of its own", key="own"),
    ]
    t += 0.5
    runs = [(i, level) for i, level in enumerate(h.levels) for _trial in range(h.trials.get(level, 1))]
    for i, c in runs:
        trial = 1 + sum(1 for e in events if isinstance(e, LevelStarted) and e.level == c)
        again = trial < h.trials.get(c, 1)  # measured again after this trial
        events.append(LevelStarted(ts=t, mode="concurrency", level=c, index=i, total=len(h.levels), workers=1,
                                   trial=trial))
        measured = []
        for w in range(h.windows + 1):
            n = int(rng.integers(150, 400)) * c
            s = rng.lognormal(np.log(c * 1e6), 0.4, n).astype(np.int64)
            events.append(WindowResult(
                ts=t + WINDOW_S, level=c, index=w, warmup=w == 0, t_start=t, t_end=t + WINDOW_S, requests=n,
                errors=w, throughput_rps=n / WINDOW_S, throughput_ips=n / WINDOW_S,
                latency=latency_stats(s, histogram=h.histogram), stable_so_far=w == h.windows,
                errors_by_kind={"timeout": w} if w else {}))
            h.window_samples[(c, w)] = s
            if w:
                measured.append(s)
            t += WINDOW_S
        every = np.concatenate(measured)
        h.samples[c] = every
        errors = sum(range(1, h.windows + 1))
        events.append(LevelResult(
            ts=t, mode="concurrency", level=c, index=i, status="unstable" if again else "stable", trial=trial,
            remeasure="its windows did not agree" if again else "", batch_size=1, windows=h.windows,
            merged_windows=h.windows, requests=every.size, errors=errors, throughput_rps=every.size / (h.windows * WINDOW_S),
            throughput_ips=every.size / (h.windows * WINDOW_S), latency=latency_stats(every, histogram=h.histogram),
            errors_by_kind={"timeout": errors}, duration_s=h.windows * WINDOW_S))
        t += 0.2
    events += [SweepFinished(ts=t, levels=len(h.levels), stable=len(h.levels), failed=0),
               SessionEnded(ts=t + 0.1, status="ok")]
    return events


def recorded(tmp: Path, h: Host) -> Path:
    return record_events(tmp / f"{h.name}.sqlite", host_events(h))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def levels_of(path: Path) -> dict[float, LevelResult]:
    with Recording.open(path) as r:
        return {lv.result.level: lv.result for lv in r.summary().levels}


def assert_within_error(got: LatencyStats, samples: np.ndarray) -> None:
    exact = latency_stats(samples)  # perf_analyzer's rule over every host's raw samples together
    assert got.count == exact.count
    for q in PERCENTILES:
        want = getattr(exact, f"p{q}")
        assert want <= getattr(got, f"p{q}") <= want * (1 + RELATIVE_ERROR), q
    assert (got.min, got.max) == (exact.min, exact.max)
    assert got.mean == pytest.approx(exact.mean, rel=1e-9)


def test_merged_figures_are_the_hosts_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = [Host("pod-0", 1), Host("pod-1", 2, offset_s=0.3), Host("pod-2", 3, offset_s=0.1)]
    files = [recorded(tmp_path, h) for h in hosts]
    out = tmp_path / "merged.sqlite"
    code, text, err = cli(capsys, "merge", *map(str, files), "-o", str(out))
    assert (code, err) == (0, "")
    assert "2 levels merged from 3 hosts (pod-0, pod-1, pod-2)" in text
    merged = levels_of(out)
    singles = [levels_of(f) for f in files]
    assert sorted(merged) == [6.0, 12.0]  # three hosts at 2 and 4 in flight: 6 and 12 together
    for c in (2, 4):
        level = merged[3.0 * c]
        assert level.throughput_rps == pytest.approx(sum(s[c].throughput_rps for s in singles), rel=1e-12)
        assert level.requests == sum(s[c].requests for s in singles)
        assert level.errors == sum(s[c].errors for s in singles)
        assert level.errors_by_kind == {"timeout": sum(s[c].errors for s in singles)}
        assert level.status == "stable" and level.degraded == ""
        assert_within_error(level.latency, np.concatenate([h.samples[c] for h in hosts]))
    with Recording.open(out) as r:
        windows = [e for e in r.events(("window",)) if isinstance(e, WindowResult)]
        meta = r.metadata
        summary = r.summary()
    assert len(windows) == 8  # 2 levels x (1 warmup + 3 measured), each of the three hosts together
    for w in windows:
        c = int(w.level // 3)
        assert w.t_start == T0 + 0.5 + (0 if c == 2 else 4 * WINDOW_S + 0.2) + w.index * WINDOW_S  # the earliest host's
        assert_within_error(w.latency, np.concatenate([h.window_samples[(c, w.index)] for h in hosts]))
    assert [s["hostname"] for s in meta["merged_from"]] == ["pod-0", "pod-1", "pod-2"]
    assert [s["offset_s"] for s in meta["merged_from"]] == pytest.approx([0.0, 0.3, 0.1])
    assert meta["host"]["hostname"] == "pod-0 + pod-1 + pod-2"
    assert summary.levels_planned == [6.0, 12.0] and summary.status == "ok"
    assert {"load: pod-0: a warning of its own", "load: pod-1: a warning of its own"} <= set(summary.warnings)


def test_a_merged_recording_replays_exports_and_compares(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [recorded(tmp_path, Host(f"h{i}", i)) for i in range(2)]
    out = tmp_path / "m.sqlite"
    assert cli(capsys, "merge", *map(str, files), "-o", str(out))[0] == 0
    source = ReplaySource(out, speed=None, linger=False)
    got: list[Event] = []
    source.bus.subscribe(got.append)
    source.start()
    assert source.join(30)
    assert sum(isinstance(e, LevelResult) for e in got) == 2 and isinstance(got[-1], SessionEnded)
    export_dir = tmp_path / "export"
    code, text, err = cli(capsys, "export", str(out), "-f", "md", "-f", "html", "-f", "csv", "-f", "json",
                          "--out", str(export_dir))
    assert (code, err) == (0, "")
    report = next(export_dir.glob("*.md")).read_text()
    assert "Load hosts" in report and "h0 (h0.sqlite)" in report and "h1 (h1.sqlite)" in report
    rows = list(csv.DictReader(next(export_dir.glob("*.csv")).open()))
    merged = levels_of(out)
    assert [float(r["Concurrency"]) for r in rows] == sorted(merged)
    assert [float(r["Inferences/Second"]) for r in rows] == pytest.approx([merged[k].throughput_ips for k in sorted(merged)], rel=1e-3)
    document = json.loads(next(export_dir.glob("*.json")).read_text())
    assert document["metadata"]["merged_from"][1]["hostname"] == "h1"
    # a single host at 4 in flight stands beside the merged run's level 4 (two hosts at 2)
    single = recorded(tmp_path, Host("solo", 9, levels=[4, 8]))
    code, text, err = cli(capsys, "compare", str(out), str(single))
    assert code == 0, err
    assert "concurrency levels differ" not in text


def test_hosts_out_of_step_at_a_level_mark_it_degraded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each host decides its own windows; one that lagged more than a window behind at a level
    measured another load: the level is degraded and the merged run does not end ok."""
    late = host_events(Host("b", 2))
    shift = 2.5 * WINDOW_S
    late = [replace(e, t_start=e.t_start + shift, t_end=e.t_end + shift)
            if isinstance(e, WindowResult) and e.level == 4 else e for e in late]
    files = [recorded(tmp_path, Host("a", 1)), record_events(tmp_path / "b.sqlite", late)]
    out = tmp_path / "m.sqlite"
    assert cli(capsys, "merge", *map(str, files), "-o", str(out))[0] == 0
    merged = levels_of(out)
    assert merged[4.0].degraded == ""
    assert merged[8.0].degraded.startswith("the hosts measured it at different times: b began 2.5 s after a")
    with Recording.open(out) as r:
        assert r.summary().status == "failed"


@pytest.mark.parametrize(("change", "words"), [
    ({"model": "other_model"}, "model differs: vit_tiny (a, a.sqlite); other_model (b, b.sqlite): not one plan"),
    ({"transport": "grpc"}, "transport differs: http (a, a.sqlite); grpc (b, b.sqlite)"),
    ({"levels": [2, 8]}, "planned levels differs: 2, 4 (a, a.sqlite); 2, 8 (b, b.sqlite)"),
    ({"offset_s": 1.5}, "b began measuring 1.5 s after a, more than a window (1 s): start the hosts at one"),
    ({"histogram": False}, "b.sqlite: recorded without latency histograms"),
    ({"model_config": {"max_batch_size": 32, "dynamic_batching": {}}}, "model config differs in max_batch_size: 8 (a, a.sqlite); 32 (b, b.sqlite)"),
])
def test_not_apples_to_apples_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict,
                                         words: str) -> None:
    files = [recorded(tmp_path, Host("a", 1)), recorded(tmp_path, Host("b", 2, **change))]
    out = tmp_path / "m.sqlite"
    code, text, err = cli(capsys, "merge", *map(str, files), "-o", str(out))
    assert code == 2 and text == ""
    assert err.count("\n") == 1 and words in err, err
    assert not out.exists()


def test_a_level_one_host_measured_again_merges_each_hosts_kept_trial(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """b measured level 4 twice, a once ("2, 4, 4 (trial 2)" against "2, 4"): the merged level is
    a's trial 1 with b's trial 2 (the one b's answer kept), the rule said in the recording; b's
    trial 2 began a level after a's, so the level is degraded, not a figure."""
    a, b = Host("a", 1), Host("b", 2, trials={4: 2})
    files = [recorded(tmp_path, a), recorded(tmp_path, b)]
    out = tmp_path / "m.sqlite"
    code, text, err = cli(capsys, "merge", *map(str, files), "-o", str(out))
    assert (code, err) == (0, ""), err
    assert "2 levels merged from 2 hosts" in text
    merged, singles = levels_of(out), [levels_of(f) for f in files]
    assert sorted(merged) == [4.0, 8.0]
    kept = merged[8.0]
    assert kept.requests == singles[0][4].requests + singles[1][4].requests  # b's kept trial (levels_of: the last)
    assert singles[1][4].trial == 2 and kept.trial == 2 and kept.remeasure == ""
    assert_within_error(kept.latency, np.concatenate([a.samples[4], b.samples[4]]))
    assert kept.degraded.startswith("the hosts measured it at different times: b began 4.2 s after a")
    assert "(kept trials: a 1, b 2)" in kept.degraded
    assert merged[4.0].degraded == "" and merged[4.0].trial == 1
    with Recording.open(out) as r:
        windows = list(r.events(("window",)))
        summary = r.summary()
    assert len(windows) == 8  # b's superseded trial is left out
    rule = next(w for w in summary.warnings if "kept trial" in w)
    assert "each host's kept trial (its last, the one its own answer stands on)" in rule
    assert "level 8 (a trial 1, b trial 2)" in rule
    assert summary.status == "failed"
    # replayed, the sweep's line counts the level degraded without blaming an endpoint (none was missing)
    with Recording.open(out) as r:
        (finished,) = list(r.events(("sweep_finished",)))
    line = describe(finished)
    assert line is not None and "1 degraded (no decision rests on it)" in line and "endpoint" not in line, line


def test_kept_trials_measured_together_merge_sound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Both hosts measured level 2 again: their kept trials ran together, so the level and the
    ones after it merge as any other."""
    hosts = [Host("a", 1, trials={2: 2}), Host("b", 2, trials={2: 2})]
    files = [recorded(tmp_path, h) for h in hosts]
    out = tmp_path / "m.sqlite"
    assert cli(capsys, "merge", *map(str, files), "-o", str(out))[0] == 0
    merged = levels_of(out)
    assert [merged[k].degraded for k in (4.0, 8.0)] == ["", ""]
    assert merged[4.0].trial == 2
    assert_within_error(merged[4.0].latency, np.concatenate([h.samples[2] for h in hosts]))
    with Recording.open(out) as r:
        summary = r.summary()
    assert summary.status == "ok" and not any("kept trial" in w for w in summary.warnings)


def test_different_levels_are_refused_with_how_to_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A host that stopped after its first level: the levels differ whatever the trials."""
    short = [e for e in host_events(Host("b", 2)) if not (isinstance(e, (LevelStarted, LevelResult, WindowResult))
                                                            and e.level == 4)]
    files = [recorded(tmp_path, Host("a", 1)), record_events(tmp_path / "b.sqlite", short)]
    code, _text, err = cli(capsys, "merge", *map(str, files), "-o", str(tmp_path / "m.sqlite"))
    assert code == 2 and "the hosts ran different levels: 2, 4 (a) against 2 (b)" in err
    assert "run the plan to its end on every host" in err and err.count("\n") == 1


def _same_session_refused(capsys: pytest.CaptureFixture[str], files: list[Path], out: Path, words: str) -> None:
    before = {f: f.read_bytes() for f in files}
    code, text, err = cli(capsys, "merge", *map(str, files), "-o", str(out))
    assert code == 2 and text == "", err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err, err
    assert not out.exists()
    assert {f: f.read_bytes() for f in files} == before  # nothing recorded is touched


def test_the_same_session_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    a, b = recorded(tmp_path, Host("a", 1)), recorded(tmp_path, Host("b", 2))
    _same_session_refused(capsys, [a, b, a], tmp_path / "m1.sqlite",
                          "session s-a is in the recordings twice (given twice): one host's run would count as two")
    copy = tmp_path / "elsewhere" / "c.sqlite"  # a byte copy, caught by a glob
    copy.parent.mkdir()
    shutil.copyfile(a, copy)
    _same_session_refused(capsys, [a, b, copy], tmp_path / "m2.sqlite",
                          "session s-a is in the recordings twice (a.sqlite and c.sqlite)")
    # the same events under another session id
    renamed = [replace(e, session_id="s-other") if isinstance(e, SessionStarted) else e
               for e in host_events(Host("a", 1))]
    other = record_events(tmp_path / "other.sqlite", renamed)
    _same_session_refused(capsys, [a, other], tmp_path / "m3.sqlite",
                          "a.sqlite and other.sqlite recorded the same events (sessions s-a and s-other)")
    assert cli(capsys, "merge", str(a), str(b), "-o", str(tmp_path / "m4.sqlite"))[0] == 0


def test_a_copy_under_the_same_name_in_another_folder_is_named_by_its_paths(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A glob over two folders that caught a byte copy: the line names both files, not 'given twice'
    (what one path given twice reads; the user gave it once)."""
    import shutil

    a, b = recorded(tmp_path, Host("a", 1)), recorded(tmp_path, Host("b", 2))
    copy = tmp_path / "elsewhere" / "a.sqlite"
    copy.parent.mkdir()
    shutil.copyfile(a, copy)
    _same_session_refused(capsys, [a, b, copy], tmp_path / "m.sqlite",
                          f"session s-a is in the recordings twice ({a.resolve()} and {copy.resolve()})")
    _same_session_refused(capsys, [a, b, tmp_path / "." / "a.sqlite"], tmp_path / "m.sqlite",
                          "session s-a is in the recordings twice (given twice)")


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = [recorded(tmp_path, Host("a", 1)), recorded(tmp_path, Host("b", 2))]
    text_file = tmp_path / "notes.sqlite"
    text_file.write_text("not a recording\n")
    existing = tmp_path / "exists.sqlite"
    existing.write_text("")
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    cases = [
        ([str(good[0]), str(tmp_path / "missing.sqlite")], tmp_path / "o1.sqlite", "missing.sqlite: no such recording"),
        ([str(good[0]), str(text_file)], tmp_path / "o2.sqlite", "not a gpuscale-tui recording"),
        ([str(good[0])], tmp_path / "o3.sqlite", "merge needs two or more recordings, got 1"),
        ([str(g) for g in good], existing, "exists.sqlite: already exists"),
        ([str(g) for g in good], blocker / "m.sqlite", "cannot create the recording"),
    ]
    for files, out, words in cases:
        code, text, err = cli(capsys, "merge", *files, "-o", str(out))
        assert code == 2 and text == "", (words, err)
        assert err.count("\n") == 1 and words in err and "Traceback" not in err, (words, err)
    assert existing.read_text() == ""
    with pytest.raises(SystemExit) as stopped:  # argparse's own one line
        main(["merge", str(good[0]), str(good[1])])
    assert stopped.value.code == 2 and "-o" in capsys.readouterr().err


def test_a_recording_made_before_histograms_reads_and_is_not_merged(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A recording whose events have no histogram field at all (written before it existed) still
    opens, summarises and replays; merge refuses it in one line."""
    import sqlite3

    old = recorded(tmp_path, Host("old", 2))
    with sqlite3.connect(old) as db:
        db.execute("UPDATE events SET data = json_remove(data, '$.latency.histogram') WHERE kind IN ('window', 'level_result')")
    with Recording.open(old) as r:
        assert '"histogram"' not in "".join(d for _s, _t, _k, d in r.raw_rows() if _k in ("window", "level_result"))
        summary = r.summary()
        assert [lv.result.latency.histogram for lv in summary.levels] == [None, None]
        assert summary.levels[0].result.latency.p99 is not None
    source = ReplaySource(old, speed=None, linger=False)
    got: list[Event] = []
    source.bus.subscribe(got.append)
    source.start()
    assert source.join(30) and sum(isinstance(e, WindowResult) for e in got) == 8
    code, _text, err = cli(capsys, "merge", str(recorded(tmp_path, Host("new", 1))), str(old), "-o",
                           str(tmp_path / "m.sqlite"))
    assert code == 2 and "old.sqlite: recorded without latency histograms" in err and err.count("\n") == 1


def test_windows_one_host_lacks_are_left_out_of_the_timeline_and_said(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    files = [recorded(tmp_path, Host("a", 1)), recorded(tmp_path, Host("b", 2, windows=4))]
    out = tmp_path / "m.sqlite"
    assert cli(capsys, "merge", *map(str, files), "-o", str(out))[0] == 0
    with Recording.open(out) as r:
        windows = list(r.events(("window",)))
        summary = r.summary()
    assert len(windows) == 8  # a's 4 per level; b's fifth of each level has no counterpart
    assert "merge: 2 window(s) had no counterpart on every host" in " ".join(summary.warnings)
    merged = levels_of(out)
    assert merged[4.0].requests == levels_of(files[0])[2].requests + levels_of(files[1])[2].requests
