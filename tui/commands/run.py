"""`gpuscale-tui [run]`: one session (sweep, training probe, or both) in the TUI, or headless with
progress lines; recorded unless --no-record."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tui.commands.exits import EXIT_CODES, PROG
from tui.commands.flags import (
    add_endpoint_flags,
    api_override,
    check_input_data,
    endpoint_overrides,
    input_data_override,
    slo_override,
)
from tui.commands.hosts import add_host_flags
from tui.metrics_flags import add_metrics_flags, metrics_endpoint


def add_flags(p: argparse.ArgumentParser) -> None:
    """The run flags: on `run` and on the bare command, which runs a session too."""
    p.add_argument("--profile", "-p", default="local", metavar="NAME|PATH",
                   help="a bundled profile (see `gpuscale-tui profiles`) or a path to a .toml file (default: local)")
    p.add_argument("--record", action="store_true",
                   help="headless: no TUI, Rich progress lines (for nohup/tmux/CI); the session is recorded")
    p.add_argument("--headless", action="store_true", help="same as --record")
    p.add_argument("--probe", action="store_true", help="also run the training probe after the sweep")
    p.add_argument("--probe-only", action="store_true", help="run the training probe only (no Triton sweep)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a profile value, e.g. --set load.concurrency=1,8,32 --set load.window_ms=2000")
    p.add_argument("--output", "-o", type=Path, default=Path("recordings"), metavar="DIR",
                   help="folder for the recording (default: recordings/)")
    p.add_argument("--no-record", action="store_true", help="do not write a recording")
    p.add_argument("--no-check", action="store_true", help="skip the box check at the start (see `gpuscale-tui check`)")
    p.add_argument("--input-data", default=None, metavar="PATH",
                   help="send real inputs: a perf_analyzer --input-data JSON file or folder (load.input_data)")
    p.add_argument("--wire", action="store_true",
                   help="after the sweep, measure the request path alone: the same levels against the no-compute "
                        "`wire` model with this model's bytes per request (load.wire_check = true)")
    p.add_argument("--slo", default=None, metavar="OBJECTIVES",
                   help="a streaming model's objectives, e.g. ttft_p99=200ms,itl_p99=50ms: the goodput at the end (load.slo)")
    add_endpoint_flags(p)
    add_metrics_flags(p)
    add_host_flags(p)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run a session (the default command)", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(p)


def run(args: argparse.Namespace) -> int:
    from engine.profiles import load_profile
    from engine.session import Session, SessionOptions
    from tui.commands.headless_session import run_headless

    overrides = [*api_override(args), *args.overrides, *(["load.wire_check=true"] if getattr(args, "wire", False) else []),
                 *endpoint_overrides(args), *input_data_override(args), *slo_override(args)]
    from tui.commands.remote import check_url_flags, name_after_server

    check_url_flags(args)
    profile = name_after_server(load_profile(args.profile, overrides), args)
    check_input_data(profile.load)
    from tui.commands import hosts

    group = hosts.join(args, profile) if hosts.wanted(args) else None
    if group is not None and not group.head:
        return hosts.run_member(group, profile)
    options = SessionOptions(
        sweep=not args.probe_only,
        probe=True if (args.probe or args.probe_only) else None,
        record_dir=None if args.no_record else args.output,
        check=not args.no_check,
        hosts=group,
    )
    headless = args.record or args.headless or not sys.stdout.isatty()
    options.interactive = not headless
    with metrics_endpoint(args, PROG) as metrics:
        session = Session(profile, options)
        metrics.watch(session.bus)
        if headless:
            return run_headless(session)
        from tui.app import run_tui

        return run_tui(session, controls=session, title=f"{PROG} · {profile.name}")
