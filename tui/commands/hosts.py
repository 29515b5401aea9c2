"""`--hosts N --rank R --rendezvous HOST:PORT`: one session driven from several client hosts
(engine/multihost/). Rank 0, the head, runs the session (TUI or headless, and the recording);
every other rank runs its share of the load headless and prints a line per window."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import TYPE_CHECKING

from engine.errors import UserError
from tui.commands.exits import PROG

if TYPE_CHECKING:  # engine.profiles reads TOML with tomllib: the CLI's version check must come first
    from engine.profiles import Profile

DEFAULT_TIMEOUT_S = 60.0


def add_host_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=int, default=1, metavar="N",
                   help="client hosts that drive this session together (each runs its share of every level)")
    p.add_argument("--rank", type=int, default=0, metavar="R",
                   help="this host's rank, 0 to N-1; rank 0 (the head) shows and records the session")
    p.add_argument("--rendezvous", default=None, metavar="HOST:PORT",
                   help="the head's address and a free port there: the head holds the group's store, "
                        "the other hosts connect to it")
    p.add_argument("--rendezvous-token", default=None, metavar="TOKEN",
                   help="the group's token, which the head prints when it starts (or GPUSCALE_RENDEZVOUS_TOKEN): every "
                        "other host must give it; the head makes one unless given; never recorded (the environment keeps "
                        "it out of ps)")
    p.add_argument("--rendezvous-timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                   help=f"the longest wait for the group to form (default: {DEFAULT_TIMEOUT_S:g} s)")


def wanted(args: argparse.Namespace) -> bool:
    """Whether the flags ask for a group (and are whole: UserError otherwise)."""
    hosts, rank, address = getattr(args, "hosts", 1), getattr(args, "rank", 0), getattr(args, "rendezvous", None)
    if hosts == 1 and rank == 0 and address is None:
        return False
    if hosts < 2:
        raise UserError(f"--hosts {hosts}: a group needs at least 2 hosts")
    if address is None:
        raise UserError("--hosts: give --rendezvous HOST:PORT (the head's address) on every host")
    if not args.rendezvous_timeout > 0:
        raise UserError(f"--rendezvous-timeout {args.rendezvous_timeout:g}: expected a number of seconds > 0")
    if getattr(args, "probe", False) or getattr(args, "probe_only", False):
        raise UserError("--hosts: the training probe runs on one host (torchrun spreads it): leave out --probe")
    return True


def join(args: argparse.Namespace, profile: Profile):  # noqa: ANN201 - engine.multihost.group.HostGroup
    """This host's place in the group, checked against the profile (one line and exit 2 when not)."""
    from engine.multihost.group import HostGroup
    from engine.multihost.host_plan import check_plan, fingerprint

    check_plan(profile, args.hosts)
    return HostGroup.join(args.rendezvous, args.hosts, args.rank, args.rendezvous_timeout, fingerprint(profile),
                          token(args))


def token(args: argparse.Namespace) -> str:
    """The group's token: the flag's, else the environment's; the head makes one and prints it."""
    from engine.multihost.group import TOKEN_ENV, new_token

    given = getattr(args, "rendezvous_token", None) or os.environ.get(TOKEN_ENV, "")
    if given or args.rank > 0:
        return given  # a member without one is refused by the join, in one line
    made = new_token()
    print(f"{PROG}: rendezvous token: {made} (give it to every other host: --rendezvous-token or {TOKEN_ENV})",
          file=sys.stderr, flush=True)
    return made


def run_member(group, profile: Profile) -> int:  # noqa: ANN001 - a HostGroup of rank > 0
    """A host other than the head: its share of the sweep, a line per window; the exit code."""
    from engine.multihost.member import MemberSweep

    def say(line: str) -> None:
        print(line, flush=True)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, stop.set)
        return await MemberSweep(group, profile, say, stop).run()

    code = asyncio.run(main())
    if code:
        print(f"{PROG}: host {group.rank}: the sweep did not run to its end", file=sys.stderr)
    return code
