"""Who took a full host's CPU, and so what is said of it and what is advised: one rule for every
surface that words the host-cpu case (the bottleneck verdict and its evidence, the finding of a
busy host, the report's advice).

A host's busy CPU splits into the server's processes, our load generator and others (every other
process, the kernel's own work), each in % of the whole host. The rule:
- others: others take at least half of the busy share (others >= server + ours, others > 0).
  The server and the load generator then ran on what was left; shared memory or a client on
  another machine answers a problem they do not have, so the remedy is a quieter box: stop the
  other work, or measure elsewhere, and measure again;
- shared: the server and the load generator take more than others: they share the cores and use
  them all, and what tells their figures apart is taking work off one side (shared memory, a
  client on another machine, fewer model instances);
- unknown: the server's or our share was not recorded (a remote server not found on this host,
  an older recording, the cores not known): who took the CPU is said to be unknown, blaming no one.
Pure: shares in, words out.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine import format as fmt

OTHERS, SHARED, UNKNOWN = "others", "shared", "unknown"


@dataclass(frozen=True)
class HostCpuWords:
    who: str  # OTHERS, SHARED or UNKNOWN
    summary: str  # the verdict's headline
    next_step: str  # the verdict's last evidence line: what to do about it
    advice: str  # the report's advice paragraph under that verdict
    clause: str  # after "the host's CPUs were 95% busy at concurrency 8: ", where it is a finding only
    finding_advice: str  # the report's advice line for that finding


def who_takes(server: float | None, ours: float | None, others: float | None) -> str:
    """OTHERS, SHARED or UNKNOWN (the module's rule); shares in % of the whole host."""
    if server is None or ours is None or others is None:
        return UNKNOWN
    return OTHERS if others > 0 and others >= server + ours else SHARED


def host_cpu_words(server: float | None, ours: float | None, others: float | None) -> HostCpuWords:
    """The words for a full host whose busy CPU split as given (% of the whole host; None: not recorded)."""
    who = who_takes(server, ours, others)
    if who == OTHERS:
        taken = fmt.percent_points(others)
        return HostCpuWords(
            OTHERS,
            f"the host's CPUs are the limit, taken mostly by other processes on this host (others {taken} of "
            "the host): the server and the load generator ran on what was left",
            "what to do: stop the other work on this host or measure on a quieter box, then measure again: "
            "until then these figures are what the server did with the CPU left to it",
            f"Other processes on this host took most of its busy CPU (others {taken} of the host, the server's "
            f"processes {fmt.percent_points(server)}, our load generator {fmt.percent_points(ours)}), so these "
            "figures are what the server did with what was left, not what it can do. Stop the other work on this "
            "host or measure on a quieter box, then measure again before sizing a box on them.",
            f"other processes on this host took most of it (others {taken} of the host)",
            "Stop the other work on this host (or measure on a quieter box) and measure again: other processes "
            "took most of its CPU, so these figures understate what the server can do.",
        )
    if who == SHARED:
        return HostCpuWords(
            SHARED,
            "the host's CPUs are the limit: the server (on this host) and the load generator share them and "
            "use them all",
            "what tells them apart: inputs by shared memory (load.transport = system_shm) take the HTTP bodies "
            "off both sides; a client on another machine leaves the host to the server; fewer model instances "
            "(fewer backend processes) leave more to the HTTP front end",
            "The server and the load generator share this host's CPUs and use them all, so neither figure is "
            "the server's alone. To tell them apart: move the inputs off the HTTP body (load.transport = "
            "system_shm), run the client on another machine against this server, or run fewer model instances; "
            "sizing a box needs the server measured with the host to itself.",
            "the server's processes and the load generator compete for them",
            "Free the host's CPUs (or run the load generator on another machine) and measure again: "
            "a CPU-starved host understates what the server can do.",
        )
    return HostCpuWords(
        UNKNOWN,
        "the host's CPUs are the limit: they were full, and how the server, the load generator and other "
        "processes shared them was not recorded",
        "what to do: measure again with the host to itself; a recording that has each party's share (the "
        "server on this host, embedded or on its loopback) says who took the CPU",
        "This host's CPUs were full, and the recording does not say who took them (the server's processes, the "
        "load generator or other work), so no figure here is the server's alone. Measure again with the host "
        "to itself before sizing a box on these figures.",
        "whatever runs there (load workers, an embedded server, other jobs) competes for CPU",
        "Free the host's CPUs and measure again: a CPU-starved host understates what the server can do.",
    )
