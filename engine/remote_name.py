"""A session against a remote server given by URL alone is named after that server's host, not
after the embedded default profile it started from: recordings read ``..._gpu-box_8000_...``."""

from __future__ import annotations

from urllib.parse import urlsplit

TRITON_HTTP_PORT = 8000


def server_name(urls: list[str]) -> str:
    """"gpu-box" for http://gpu-box:8000, "gpu-box:9000" for another port, "box1+2" for three
    servers; "remote" when no URL has a host."""
    hosts = []
    for url in urls:
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError:
            continue
        if host:
            hosts.append(host if port in (None, TRITON_HTTP_PORT) else f"{host}:{port}")
    if not hosts:
        return "remote"
    return hosts[0] if len(hosts) == 1 else f"{hosts[0]}+{len(hosts) - 1}"
