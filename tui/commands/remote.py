"""--url without a profile: the URL flags checked as themselves, and the session named after the
server, so that `gpuscale-tui --url URL` works as `perf_analyzer -u URL` does."""

from __future__ import annotations

import argparse

from engine.errors import UserError
from engine.profiles import DEFAULT_PROFILE, Profile, ProfileError, profile_from_dict
from engine.remote_name import server_name


def check_url_flags(args: argparse.Namespace) -> None:
    """A bad --url or --metrics-url is named as the flag it came in, not as a profile key."""
    for flag, key, urls in (("--url", "url", getattr(args, "urls", [])),
                            ("--metrics-url", "metrics_url", getattr(args, "metrics_urls", []))):
        for url in urls:
            try:
                profile_from_dict({"server": {"kind": "remote", "url": "http://x", key: url}}, "")
            except ProfileError as exc:
                detail = str(exc).split(f"server.{key}: ", 1)[-1]
                raise UserError(f"{flag}: {detail}") from None


def name_after_server(profile: Profile, args: argparse.Namespace) -> Profile:
    """The default profile with --url: the session takes the server's host for its name (the
    recording's file name, the header), and says what it measures."""
    urls = profile.server.endpoint_urls()
    if getattr(args, "urls", []) and args.profile == DEFAULT_PROFILE and urls:
        profile.name = server_name(urls)
        server = "OpenAI-compatible server" if profile.load.api == "openai" else "Triton"
        profile.description = f"{server} at {', '.join(urls)}"
    return profile
