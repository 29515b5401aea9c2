"""Free ports for the servers we start (Triton, llama-server, a study's servers), picked below the
kernel's ephemeral range so that no client connection takes one while its server restarts."""

from __future__ import annotations

import random
import socket


def free_port(address: str = "127.0.0.1") -> int:
    return free_ports(1, address)[0]


def listen_range() -> tuple[int, int]:
    """Where a server's ports are picked: below the kernel's ephemeral range, which gives outgoing
    connections their local ports. A port from that range (bind to port 0) can be taken by any
    client's connection while its server restarts on it ("Socket ... already in use")."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            ephemeral = int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 49152  # IANA's dynamic range: macOS and Windows
    return LISTEN_LOW, max(LISTEN_LOW + 1000, ephemeral)


LISTEN_LOW = 20000  # above the usual fixed ports (Triton's 8000-8002, Prometheus, Jupyter)
PORT_TRIES = 64


def free_ports(count: int, address: str = "127.0.0.1") -> list[int]:
    """``count`` distinct free ports: each probe socket stays bound until all are picked. Probed
    one at a time and released, two probes can get the same port: Triton then refuses to start
    ("cannot listen to GRPC requests and metrics requests at the same address and port"), seen
    with the test suite on two workers. Random ports below the ephemeral range (listen_range);
    the kernel's choice where none of PORT_TRIES is free."""
    low, high = listen_range()
    rng = random.SystemRandom()
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in socks:
            for _ in range(PORT_TRIES):
                try:
                    sock.bind((address, rng.randrange(low, high)))
                    break
                except OSError:
                    continue
            else:
                sock.bind((address, 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def free_port_pair(address: str = "127.0.0.1", first: int | None = None) -> tuple[int, int]:
    """Two free ports, the second right after the first (HTTP and gRPC, Triton's default
    layout); ``first`` fixes the first (a restart where clients expect it). Falls back to any
    free second port when none follows."""
    for _ in range(1 if first else 20):
        base = first or free_port(address)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds it
            try:
                sock.bind((address, base + 1))
                return base, base + 1
            except OSError:
                continue
    base = first or free_port(address)
    return base, next(p for p in free_ports(2, address) if p != base)
