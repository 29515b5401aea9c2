"""Several embedded servers side by side (scale-out): ``1x*N`` is N tritonservers of the 1x
config, each pinned to one GPU (CUDA_VISIBLE_DEVICES), as N one-GPU boxes behind a load balancer
would run; ``cpu*N`` is N servers of the cpu config on a box without GPUs.

Each server is an ordinary EmbeddedServer (engine/server/embedded.py): its own ports, its own
Python-backend shared-memory prefix, its own guard, so the guarantees of one hold for each. They
start in parallel; when one does not start, the others are stopped and the error names it. A
fleet answers what the session asks of one server (URLs, liveness, how it ended, stop), the
first server standing for the fleet where one value is asked for; ``http_urls`` lists them all.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from engine.errors import UserError
from engine.profiles import scale_out_parts
from engine.server.embedded import EmbeddedServer, ServerStartError
from engine.server.gpus import visible_gpu_count


def visible_gpus(count: int, visible: str | None) -> list[str]:
    """The GPUs this process sees, as CUDA_VISIBLE_DEVICES entries a child can be pinned to:
    our own list when one is set (a server pinned to "3" sees the machine's GPU 3), else 0..count-1."""
    if visible is not None and visible.strip() not in ("", "-1"):
        return [x.strip() for x in visible.split(",") if x.strip()][:count] or [str(i) for i in range(count)]
    return [str(i) for i in range(count)]


def pin_servers(variant: str, gpus: list[str]) -> list[str | None]:
    """The GPU each server of a scale-out variant is pinned to: server i on GPU i, in turn when
    there are more servers than GPUs (they then share); None for each on a CPU config. A GPU
    config on a machine without GPUs is bad input."""
    parts = scale_out_parts(variant)
    if parts is None:
        raise UserError(f"model.variant {variant!r} is not a scale-out variant (1x*N or cpu*N)")
    base, servers = parts
    if base.startswith("cpu"):
        return [None] * servers
    if not gpus:
        raise UserError(f"variant {variant} needs a GPU per server: this machine has none (on a CPU box: cpu*{servers})")
    return [gpus[i % len(gpus)] for i in range(servers)]


def split_cpus(cpus: list[int], servers: int) -> list[tuple[int, ...]]:
    """Each of ``servers`` CPU servers' share of the cores, as if each were its own box: the CPUs
    we may use in contiguous equal shares (the first shares one larger when they do not divide),
    or with fewer CPUs than servers, one each in turn. Two servers' stubs each computing with as
    many threads as the box has cores took each other's cores: one read 10x the other."""
    cpus = sorted(cpus)
    if not cpus:
        return [()] * servers
    if len(cpus) < servers:
        return [(cpus[i % len(cpus)],) for i in range(servers)]
    sizes = [len(cpus) // servers + (1 if i < len(cpus) % servers else 0) for i in range(servers)]
    starts = [sum(sizes[:i]) for i in range(servers)]
    return [tuple(cpus[s:s + n]) for s, n in zip(starts, sizes, strict=True)]


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity), all of them where that cannot be read."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


class ServerFleet:
    def __init__(self, variant: str, *, log_dir: Path | None = None, gpu_count: int | None = None,
                 **server_options: Any) -> None:
        parts = scale_out_parts(variant)
        if parts is None:
            raise UserError(f"model.variant {variant!r} is not a scale-out variant (1x*N or cpu*N)")
        self.base, count = parts
        self.requested_variant = variant
        present = visible_gpu_count() if gpu_count is None else gpu_count
        visible = visible_gpus(present, os.environ.get("CUDA_VISIBLE_DEVICES"))
        pins = pin_servers(variant, visible)
        # each server's GPU as this process numbers it (its place in our visible list)
        self._client_gpus = [visible.index(pin) if pin is not None else None for pin in pins]
        # more servers than GPUs: they share them (the mechanics on a small box, not a price answer)
        self.shared = self.base == "1x" and len(set(pins)) < count
        # CPU servers: each computes with its share of the cores (as many threads), as N boxes
        # would, but none is pinned to its share: pinned, each got only what its cores' other
        # tenants (the load engine, other work) left it, and two equal servers read up to 3.3x
        # apart (docs/results/scale_out_cpu_pinning.md). A caller's cpus (a bench keeping the
        # clients apart) hold the whole fleet.
        cpus = tuple(server_options.pop("cpus", ()))
        on_cpus = self.base.startswith("cpu")
        shares = split_cpus(list(cpus or usable_cpus()), count)
        threads = [len(share) or None for share in shares] if on_cpus else [None] * count
        # GPU servers: each counts its instances on its share of the cores, as on its own box
        # (unshared, N servers would each start the instances a whole box's cores allow)
        cores = [None if on_cpus else len(share) or None for share in shares]
        self.servers = [
            EmbeddedServer(variant=self.base, log_dir=log_dir / f"server{i + 1}" if log_dir else None,
                           gpu_count=1 if pin is not None else 0, pinned_gpu=pin, cpus=cpus,
                           compute_threads=n, host_cores=c, **server_options)
            for i, (pin, n, c) in enumerate(zip(pins, threads, cores, strict=True))
        ]

    # ----------------------------------------------------------------- what the session reads

    @property
    def variant(self) -> str:
        return self.requested_variant

    @property
    def http_urls(self) -> list[str]:
        return [s.http_url for s in self.servers]

    @property
    def metrics_urls(self) -> list[str]:
        return [s.metrics_url for s in self.servers]

    @property
    def http_url(self) -> str:
        return self.servers[0].http_url

    @property
    def metrics_url(self) -> str:
        return self.servers[0].metrics_url

    @property
    def grpc_url(self) -> str:
        return self.servers[0].grpc_url

    @property
    def prepared(self) -> Any:
        return self.servers[0].prepared

    @property
    def log_path(self) -> Path | None:
        """The first server's log, or once one has died, the log of the first that died."""
        dead = [s for s in self.servers if s.pid is not None and not s.alive()]
        return (dead or self.servers)[0].log_path

    @property
    def log_paths(self) -> list[Path | None]:
        return [s.log_path for s in self.servers]

    @property
    def client_gpus(self) -> list[int | None]:
        """Each server's GPU in this process's numbering (None: a CPU server): where a client puts
        a server's CUDA shared-memory inputs. The server itself sees that GPU as its GPU 0."""
        return list(self._client_gpus)

    @property
    def pid(self) -> int | None:
        return self.servers[0].pid

    @property
    def mps_used(self) -> bool:
        return all(s.mps_used for s in self.servers)

    @property
    def mps_why(self) -> str:
        whys = list(dict.fromkeys(s.mps_why for s in self.servers))
        return whys[0] if len(whys) == 1 else "; ".join(f"{self.name(i)}: {s.mps_why}" for i, s in enumerate(self.servers))

    @property
    def left_behind(self) -> list[str]:
        return [p for s in self.servers for p in s.left_behind]

    def name(self, i: int) -> str:
        """"server 2 of 4 (GPU 1)": how an error names one server."""
        pin = self.servers[i].pinned_gpu
        return f"server {i + 1} of {len(self.servers)}" + (f" (GPU {pin})" if pin is not None else "")

    def alive(self) -> bool:
        return all(s.alive() for s in self.servers)

    def exit_reason(self) -> str:
        gone = [f"{self.name(i)}, {s.http_url}: {s.exit_reason()}" for i, s in enumerate(self.servers) if not s.alive()]
        return "; ".join(gone) or "reason unknown"

    # ----------------------------------------------------------------- start, stop

    def start(self) -> ServerFleet:
        """Every server, in parallel; when one does not start, all are stopped and the error
        names the first that failed (with its log's tail)."""
        with ThreadPoolExecutor(max_workers=len(self.servers), thread_name_prefix="fleet-start") as pool:
            futures = [pool.submit(s.start) for s in self.servers]
            try:
                wait(futures)
            except BaseException:  # interrupted: the starts finish (bounded by their timeout), then all stop
                pool.shutdown(wait=True)
                self.stop()
                raise
        failed = [(i, f.exception()) for i, f in enumerate(futures) if f.exception() is not None]
        if failed:
            self.stop()
            i, exc = failed[0]
            others = f" ({len(failed) - 1} more failed)" if len(failed) > 1 else ""
            if isinstance(exc, UserError):
                raise exc
            raise ServerStartError(f"{self.name(i)} of variant {self.variant} did not start{others}: {exc}") from exc
        return self

    def stop(self) -> None:
        """Stop every server (in parallel: each waits for its whole process group). Idempotent."""
        with ThreadPoolExecutor(max_workers=len(self.servers), thread_name_prefix="fleet-stop") as pool:
            list(pool.map(lambda s: s.stop(), self.servers))

    def __enter__(self) -> ServerFleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
