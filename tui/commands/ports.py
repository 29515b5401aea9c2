"""`gpuscale-tui server --ports`: Triton's default ports (8000 HTTP, 8001 gRPC, 8002 metrics), so
that the README's SSH tunnel and NVIDIA's container layout reach the embedded server alike."""

from __future__ import annotations

import argparse

TRITON_DEFAULT_PORTS = (8000, 8001, 8002)  # HTTP, gRPC, metrics


def parse_ports(text: str) -> tuple[int, int, int]:
    """``default`` or ``HTTP,GRPC,METRICS`` (three distinct ports 1-65535)."""
    if text.strip().lower() == "default":
        return TRITON_DEFAULT_PORTS
    parts = [p.strip() for p in text.split(",")]
    try:
        ports = tuple(int(p) for p in parts)
    except ValueError:
        ports = ()
    if len(ports) != 3 or not all(0 < p < 65536 for p in ports) or len(set(ports)) != 3:
        raise argparse.ArgumentTypeError(f"expected 'default' (8000,8001,8002) or three distinct ports "
                                         f"HTTP,GRPC,METRICS, found {text!r}")
    return ports[0], ports[1], ports[2]
