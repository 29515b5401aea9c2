"""Who took a full host's CPU decides what the verdict says and advises (issue 54: a verdict that
blamed the server and the load generator above "others 84 %"): one table of recorded-like shares,
each row's kind of sentence and remedy, and the verdict built on those rows."""

from __future__ import annotations

import pytest

from engine.analysis.bottleneck import LevelEvidence, diagnose
from engine.analysis.host_cpu_share import OTHERS, SHARED, UNKNOWN, host_cpu_words, who_takes
from engine.analysis.saturation import saturation_point

# (server %, ours %, others %) of the whole host -> who took it. Shares as cpu_shares() makes them
# from a level's host samples; busy = their sum.
ROWS = [
    ((10.0, 5.0, 84.0), OTHERS),  # the newcomer's box: other processes took most of it
    ((60.0, 25.0, 5.0), SHARED),  # tests/engine/analysis/test_host_cpu_verdict.py's 1x H200 box
    ((79.0, 6.0, 0.0), SHARED),  # docs/results/host_cpu_verdict_h200.md: the server's stubs, nearly all
    ((30.0, 15.0, 45.0), OTHERS),  # others exactly half of the busy share: they take it
    ((30.0, 16.0, 44.0), SHARED),  # just under half
    ((0.0, 0.0, 0.0), SHARED),  # nothing taken by anyone: others are not blamed for nothing
    ((None, 20.0, None), UNKNOWN),  # the server's share not recorded (a remote server, an older recording)
    ((None, None, None), UNKNOWN),  # no share recorded: the cores not known
]

# what each kind's sentences say, and what they must never say
SAYS = {
    OTHERS: (("other processes on this host",), ("quieter box", "stop the other work"),
             ("shared memory", "system_shm", "another machine", "use them all")),
    SHARED: (("share them and use them all",), ("shared memory", "another machine"), ("other processes",)),
    UNKNOWN: (("not recorded",), ("host to itself",),
              ("other processes on this host", "use them all", "shared memory", "another machine")),
}


@pytest.mark.parametrize(("shares", "who"), ROWS)
def test_who_took_the_cpu_decides_the_sentence_and_the_remedy(shares: tuple[float | None, ...], who: str) -> None:
    assert who_takes(*shares) == who
    words = host_cpu_words(*shares)
    headline, remedy, never = SAYS[who]
    assert words.who == who
    assert all(phrase in words.summary for phrase in headline), words.summary
    for text in (words.next_step.lower(), words.advice.lower()):
        assert any(phrase in text for phrase in remedy), text
    for text in (words.summary, words.next_step, words.advice, words.clause, words.finding_advice):
        assert not any(phrase in text.lower() for phrase in never), (who, text)
    if who == OTHERS:  # the headline carries the figure its evidence shows
        assert "others 84%" in words.summary or "others 45%" in words.summary


def _full(level: float, tp: float, server: float, ours: float, host: float = 95.0) -> LevelEvidence:
    # 16 cores; per-process figures in % of one core, as recorded
    return LevelEvidence(level=level, throughput=tp, latency_mean=0.2, queue=0.01, compute=0.05,
                         client_minus_server=0.05, gpu_util={"g": 40.0}, host_cpu_percent=host,
                         server_cpu_percent=server * 16, own_cpu_percent=ours * 16, client_cpu_wait=0.25)


@pytest.mark.parametrize(("shares", "who"), [r for r in ROWS if r[1] != UNKNOWN and sum(r[0]) > 0])  # type: ignore[arg-type]
def test_the_verdict_follows_its_evidence(shares: tuple[float, float, float], who: str) -> None:
    server, ours, others = shares
    busy = server + ours + others
    levels = [_full(1, 20, server, ours, 40.0), _full(4, 70, server, ours, 40.0),
              _full(8, 80, server, ours, busy), _full(16, 81, server, ours, busy)]
    v = diagnose(levels, saturation_point([(e.level, e.throughput) for e in levels]), 1,
                 server_local=True, host_cores=16)
    assert v.kind == "host-cpu" and v.summary == host_cpu_words(server, ours, others).summary
    assert v.evidence[-1] == host_cpu_words(server, ours, others).next_step
    assert v.advice == host_cpu_words(server, ours, others).advice
