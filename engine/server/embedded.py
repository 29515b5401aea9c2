"""The embedded Triton server: a real tritonserver on loopback, started and stopped by us.

Lifecycle guarantees:
* free loopback ports for HTTP, gRPC and metrics (bind address configurable, loopback default),
  gRPC on the HTTP port + 1 as in Triton's default layout (the grpc transport finds it there);
* readiness awaited with a timeout; failure raises ServerStartError carrying the log's tail;
* the log is kept where the caller asks (with the session's recording);
* tritonserver runs under engine.server.guard in its own process group, so it dies with us even
  when we are killed with SIGKILL — never an orphaned server or Python-backend stub;
* stop() returns when that whole group is gone (the server and its stubs, their GPU memory
  freed), not merely signalled: the next server, or a check of the GPUs, must not meet them;
* on GPUs it runs under a private MPS daemon where it can (``mps``, engine/server/mps.py): the
  stubs' CUDA contexts then share each GPU instead of taking turns. If the daemon or the server
  does not start under it, ``mps="auto"`` starts the server again without it and says why
  (``mps_why``); ``mps="on"`` fails.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

from engine.errors import RunFailed, UserError
from engine.net import http1
from engine.server.distribution import assemble_backends, find_distribution, server_environment
from engine.server.gpus import pin_value, smallest_memory_gib, visible_gpu_count
from engine.server.guard import GRACE_S, MPS_FAILED, REAP_S, kill_group_and_wait, process_name
from engine.server.mps import choose, find_control, instances_under_mps
from engine.server.ports import free_port_pair, free_ports
from engine.server.repository import (
    PreparedModel,
    instance_count,
    parameter,
    prepare_repository,
    set_instance_count,
)
from engine.server.startup import (
    PROBE_TIMEOUTS,
    StartupProgress,
    group_cpu_ticks,
    next_probe_timeout,
)
from engine.shm_segments import (
    remove_segments,
    remove_stale_segments,
    segment_prefix,
    server_region_prefix,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]


class ServerStartError(RunFailed):
    """tritonserver did not become ready. The message ends with the tail of its log."""


class PortTaken(ServerStartError):
    """tritonserver could not bind a port (taken between probing and binding): worth a retry
    on new ports. Told from its log, the only place Triton says so."""


def port_taken(log_text: str) -> bool:
    """Triton's log says a port was taken: gRPC writes "Address already in use", the HTTP and
    metrics front ends "Socket '127.0.0.1:44107' already in use" (seen in CI: a test worker's
    server took the port between our probe and Triton's bind)."""
    return "already in use" in log_text.lower()


def http_threads() -> int:
    return max(8, min(64, os.cpu_count() or 8))


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"


class EmbeddedServer:
    def __init__(
        self,
        model: str = "vit_tiny",
        variant: str = "auto",
        *,
        log_dir: Path | None = None,
        gpu_count: int | None = None,
        weights: str | None = None,
        bind_address: str = "127.0.0.1",
        startup_timeout_s: float = 180.0,
        http_port: int | None = None,
        model_control: str | None = None,
        extra_models: tuple[str, ...] = (),
        mps: str = "auto",
        pinned_gpu: str | None = None,
        cpus: tuple[int, ...] = (),
        compute_threads: int | None = None,
        host_cores: int | None = None,
        ports: tuple[int, int, int] | None = None,
        server_flags: tuple[str, ...] = (),
        auto_complete: bool = False,
    ) -> None:
        self.model = model
        # more tritonserver flags, after ours (a bench's --trace-config, say)
        self.server_flags = tuple(server_flags)
        # Triton completing the model configs itself (its default): off, ours are complete; on only
        # to measure what that costs (bench server_start)
        self.auto_complete = auto_complete
        # one GPU of this machine (a CUDA_VISIBLE_DEVICES entry) the server alone sees, as one of
        # several servers side by side (engine/server/fleet.py); None: it sees what we see
        self.pinned_gpu = pinned_gpu
        # the host CPUs the server (and its Python stubs) may run on; () = all. A bench keeps a
        # client's cores apart from the server's with it, so that neither takes the other's time
        self.cpus = tuple(cpus)
        # the most compute threads a CPU model's stub starts (GPUSCALE_COMPUTE_THREADS): its share
        # of the cores as one of several servers side by side; None: as many as it may run on
        self.compute_threads = compute_threads
        # the host cores its GPU instances may count on (a fleet server's share, as one of N
        # boxes); None: the host's
        self.host_cores = host_cores
        # served beside the model, e.g. the no-compute `wire` model of the wire check; none by
        # default, so that a plain run starts no more Python stubs than it needs
        self.extra_models = tuple(m for m in extra_models if m != model)
        self.requested_variant = variant
        self.log_dir = log_dir
        self.gpu_count = (1 if pinned_gpu is not None else visible_gpu_count()) if gpu_count is None else gpu_count
        self.weights = weights
        self.bind_address = bind_address
        self.startup_timeout_s = startup_timeout_s
        self.fixed_http_port = http_port  # e.g. to restart a server where its clients expect it
        # HTTP, gRPC and metrics ports all fixed (Triton's 8000, 8001, 8002: `server --ports default`)
        self.fixed_ports = ports
        # "explicit": models load and unload through the repository API (a remote box's setup,
        # reproduced here for the study's model-control path); the model is loaded at start
        self.model_control = model_control
        self.mps = mps  # "auto", "on" or "off" (server.mps)
        self.mps_used = False  # whether the running server is an MPS client
        self.shm_region_prefix = server_region_prefix()  # its Python-backend /dev/shm regions
        self.mps_why = ""  # why it is or is not, one line
        self.prepared: PreparedModel | None = None
        self.http_port = self.grpc_port = self.metrics_port = 0
        self.log_path: Path | None = None
        self._work_dir: Path | None = None
        self._guard: subprocess.Popen[bytes] | None = None
        self._log_file: BinaryIO | None = None
        self._pipe: BinaryIO | None = None
        # processes of the server's group still alive when stop() gave up on them (normally none):
        # "name (pid)", for the session to say so
        self.left_behind: list[str] = []

    # ----------------------------------------------------------------- public

    @property
    def host(self) -> str:
        return "127.0.0.1" if self.bind_address in ("0.0.0.0", "") else self.bind_address

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def grpc_url(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def variant(self) -> str:
        return self.prepared.variant if self.prepared else self.requested_variant

    @property
    def pid(self) -> int | None:
        return self._guard.pid if self._guard else None

    def alive(self) -> bool:
        return self._guard is not None and self._guard.poll() is None

    def exit_reason(self) -> str:
        """How the server ended, from its guard's exit status (a signal N is 128 + N)."""
        code = self._guard.poll() if self._guard is not None else None
        if code is None:
            return "reason unknown"
        if code < 0:
            return f"its guard process was killed by {_signal_name(-code)}"
        if code > 128:
            return f"tritonserver killed by {_signal_name(code - 128)}" + self._uncaught()
        return f"tritonserver exit code {code}"

    def _uncaught(self) -> str:
        """What tritonserver threw before it aborted, from its log ("terminate called after
        throwing ..."); empty when it did not."""
        try:
            text = self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""
        return uncaught_exception(text)

    def start(self) -> EmbeddedServer:
        if self._guard is not None:
            raise RuntimeError("server already started")
        dist = find_distribution()
        remove_stale_segments()  # /dev/shm room for this server's regions
        self._work_dir = Path(tempfile.mkdtemp(prefix="gpuscale-triton-"))
        try:
            self.prepared = prepare_repository(
                self.model, self.requested_variant, self._work_dir / "models", gpu_count=self.gpu_count,
                weights=self.weights,
            )
            for extra in self.extra_models:
                if not (self._work_dir / "models" / extra).exists():  # not already an ensemble's step
                    prepare_repository(extra, "auto", self._work_dir / "models", gpu_count=self.gpu_count)
            backends = assemble_backends(dist, self._work_dir / "backends")
            log_dir = self.log_dir or self._work_dir
            log_dir.mkdir(parents=True, exist_ok=True)
            self.log_path = log_dir / "tritonserver.log"
            env = server_environment(dist, [str(PROJECT_ROOT)])
            if self.pinned_gpu is not None:
                env["CUDA_VISIBLE_DEVICES"] = pin_value(self.pinned_gpu)
            if self.compute_threads:
                env["GPUSCALE_COMPUTE_THREADS"] = str(self.compute_threads)
            choice = choose(self.mps, len(self.prepared.gpus), find_control())
            self.mps_used, self.mps_why = choice.use, choice.why
            authored = instance_count(self.prepared.config_text)
            if self.mps_used and authored is not None:
                self._instances(authored, under_mps=True)
            if self.fixed_ports:
                _check_ports_free(self.fixed_ports, self.bind_address)
            taken = 0
            while True:
                self._launch(dist.binary, backends, env)
                try:
                    self._wait_ready()
                    return self
                except PortTaken:  # taken between probing and binding: try new ones
                    self._terminate()
                    taken += 1
                    if taken == 3 or self.fixed_ports or self.fixed_http_port:
                        raise  # a fixed port would be taken again
                except ServerStartError as exc:
                    self._terminate()
                    if not (self.mps_used and self.mps == "auto"):
                        raise
                    # once more, without MPS: the daemon, or the server under it, did not start
                    self.mps_used = False
                    self.mps_why = _mps_failure(str(exc))
                    if authored is not None:
                        self._instances(authored, under_mps=False)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = GRACE_S + REAP_S + 5.0) -> None:
        """Stop the server and its whole process group; returns when no process of the group is
        alive (or, past a bounded wait, with those left named in ``left_behind``). Idempotent."""
        self._terminate(timeout)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._work_dir is not None:
            shutil.rmtree(self._work_dir, ignore_errors=True)
            self._work_dir = None

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def server_metadata(self) -> dict:
        reply = http1.request_blocking(self.http_url, "/v2", timeout_s=2.0)
        return reply.json() if reply.status == 200 else {}

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- internals

    def _instances(self, authored: int, *, under_mps: bool) -> None:
        """Instances per GPU: under MPS, as many as the config's mps_instances_per_gpu asks and
        the GPUs' memory holds (engine/server/mps.py); without it, the config's own count."""
        assert self.prepared is not None
        wanted = parameter(self.prepared.config_text, "mps_instances_per_gpu")
        gpus = self.prepared.gpus
        # NVML counts every GPU of the machine: a pinned server's GPU 0 is the one it is pinned to
        physical = (int(self.pinned_gpu),) if self.pinned_gpu is not None and self.pinned_gpu.isdigit() else gpus
        count = instances_under_mps(authored, int(wanted) if wanted and wanted.isdigit() else None,
                                    smallest_memory_gib(physical), len(gpus),
                                    self.host_cores or os.cpu_count() or 1) if under_mps else authored
        if count != instance_count(self.prepared.config_text):
            self.prepared = set_instance_count(self.prepared, count)

    def _launch(self, binary: Path, backends: Path, env: dict[str, str]) -> None:
        assert self.prepared is not None and self.log_path is not None
        if self.fixed_ports:
            self.http_port, self.grpc_port, self.metrics_port = self.fixed_ports
        else:
            self.http_port, self.grpc_port = free_port_pair(first=self.fixed_http_port)
            self.metrics_port = next(p for p in free_ports(3) if p not in (self.http_port, self.grpc_port))
        args = [
            str(binary),
            f"--model-repository={self.prepared.repository}",
            f"--backend-directory={backends}",
            f"--http-address={self.bind_address}",
            f"--http-port={self.http_port}",
            # Triton's default of 8 HTTP threads caps large-body loads with the GPUs idle: reading
            # request bodies is front-end work, so scale it with the host (docs/results/design_notes.md)
            f"--http-thread-count={http_threads()}",
            f"--grpc-address={self.bind_address}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-address={self.bind_address}",
            f"--metrics-port={self.metrics_port}",
            "--allow-metrics=true",
            f"--allow-gpu-metrics={'true' if self.prepared.gpus else 'false'}",
            "--strict-readiness=true",
            "--exit-on-error=true",
            "--log-verbose=0",
            # our configs are complete (tests/model_repository/test_configs_complete.py): without
            # this, each model load first runs a Python stub just to complete its config
            # (docs/results/server_start.md)
            *([] if self.auto_complete else ["--disable-auto-complete-config"]),
            *([f"--model-control-mode={self.model_control}",
               *(f"--load-model={m}" for m in (self.model, *self.extra_models))]
              if self.model_control == "explicit" else
              [f"--model-control-mode={self.model_control}"] if self.model_control else []),
            # room for a batch of 224x224 images per request without regrowing shared memory
            "--backend-config=python,shm-default-byte-size=33554432",
            "--backend-config=python,shm-growth-byte-size=16777216",
            # its regions carry this server's own prefix: its guard removes them once it is gone
            f"--backend-config=python,shm-region-prefix-name={self.shm_region_prefix}",
            *self.server_flags,
        ]
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._log_file.write(f"\n# gpuscale-tui: {' '.join(args)}\n".encode())
        self._log_file.flush()
        read_end, write_end = os.pipe()
        # The guard's stdin is a pipe whose write end only we hold: it sees EOF when we die.
        assert self._work_dir is not None
        guard_options = ["--mps", str(self._work_dir / "mps")] if self.mps_used else []
        if self.cpus:
            guard_options += ["--cpus", ",".join(map(str, self.cpus))]
        self._guard = subprocess.Popen(
            [sys.executable, "-m", "engine.server.guard", "--cleanup", str(self._work_dir),
             "--shm-prefix", segment_prefix(), "--server-shm-prefix", self.shm_region_prefix, *guard_options, "--", *args],
            stdin=read_end,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(PROJECT_ROOT),
            start_new_session=True,
        )
        os.close(read_end)
        self._pipe = os.fdopen(write_end, "wb")  # non-inheritable (PEP 446): only we hold it

    def _wait_ready(self) -> None:
        """Until every model answers ready; given up only when the server stops making progress
        (engine/server/startup.py), never at a fixed time on a busy box."""
        assert self._guard is not None
        progress = StartupProgress(self.startup_timeout_s, time.monotonic())
        waiting = [f"/v2/models/{m}/ready" for m in (self.model, *self.extra_models)]
        probe_timeout = PROBE_TIMEOUTS[0]
        while True:
            if self._guard.poll() is not None:
                raise self._start_error("tritonserver exited during start-up")
            now = time.monotonic()
            progress.observe(now, self._log_size(), group_cpu_ticks(self._guard.pid))
            if why := progress.given_up(now):
                raise self._start_error(f"tritonserver not ready after {now - progress.started:.0f} s ({why})")
            try:
                while waiting and http1.request_blocking(self.http_url, waiting[0],
                                                         timeout_s=probe_timeout).status == 200:
                    waiting.pop(0)
                if not waiting:
                    return
            except TimeoutError:
                probe_timeout = next_probe_timeout(probe_timeout)  # slow to answer, not a no
            except (OSError, http1.BadResponse):  # not listening yet, or not answering yet
                pass
            time.sleep(0.2)

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size if self.log_path else 0
        except OSError:
            return 0

    def _start_error(self, what: str) -> ServerStartError:
        message = self._failure(what)
        return (PortTaken if port_taken(message) else ServerStartError)(message)

    def _failure(self, what: str) -> str:
        """The reason first: Triton's error lines (E1121 ...), then the log's last lines."""
        if not self.log_path or not self.log_path.exists():
            return what
        lines = self.log_path.read_text(errors="replace").splitlines()
        errors = [line for line in lines if re.match(r"^E\d{4} ", line) or "Error" in line][-12:]
        tail = [line for line in lines[-12:] if line not in errors]
        shown = "\n".join([*errors, *tail])
        return f"{what} (log: {self.log_path})\n--- last lines of the server log ---\n{shown}"

    def _terminate(self, timeout: float = GRACE_S + REAP_S + 5.0) -> None:
        guard, self._guard = self._guard, None
        pipe = self._pipe
        if guard is None:
            return
        if guard.returncode is None:
            os.kill(guard.pid, signal.SIGTERM)  # the guard ends tritonserver and waits for its group
            _wait_unreaped(guard, timeout)
        # Left unreaped until here, the guard's pid (its group's id) cannot be given to another
        # process: what the group id names below is the server's group and nothing else.
        # The guard normally leaves it empty; not when it was killed or ran out of time: then the
        # stubs may still be on their way out (a SIGKILL is not an exit), so wait for them here.
        left = kill_group_and_wait(guard.pid, REAP_S)
        guard.wait()
        # the guard removes them as it ends; not when it was killed (a short stop timeout)
        remove_segments(self.shm_region_prefix)
        self.left_behind = [process_name(pid) for pid in left]
        if left and self._log_file is not None:
            self._log_file.write(f"# gpuscale-tui: still alive after stop: {', '.join(self.left_behind)}\n".encode())
            self._log_file.flush()
        if pipe is not None:
            pipe.close()
            self._pipe = None


UNCAUGHT = re.compile(r"terminate called after throwing an instance of '([^']+)'")
# a robust mutex shared with a Python-backend stub, left owner-dead: the stub died holding it
LOCK_EXCEPTION = "boost::interprocess::lock_exception"


def uncaught_exception(log: str) -> str:
    """", after an uncaught EXCEPTION (...)": the last C++ exception a server log says ended it."""
    found = UNCAUGHT.findall(log)
    if not found:
        return ""
    why = (" (a Python-backend stub died holding a lock it shares with tritonserver)"
           if found[-1] == LOCK_EXCEPTION else "")
    return f", after an uncaught {found[-1]}{why}"


def _check_ports_free(ports: tuple[int, ...], address: str) -> None:
    """Fixed ports already taken (another Triton, an earlier server): one line, before a start
    that could only fail."""
    for port in ports:
        with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds it
            try:
                sock.bind((address, port))
            except OSError as exc:
                raise UserError(f"port {port} on {address} is taken ({exc.strerror}): stop what listens "
                                "there, or choose other ports") from None


def _mps_failure(message: str) -> str:
    """One line on why the server did not start under MPS: the guard's line when the daemon
    did not start, else Triton's first error line."""
    for line in message.splitlines():
        if MPS_FAILED in line:
            return "the MPS daemon did not start: " + (line.split(MPS_FAILED, 1)[1].strip() or "no reason given")
    lines = message.splitlines()
    detail = lines[2] if len(lines) > 2 else lines[0] if lines else "no log"  # Triton's first error line
    return f"the server did not start under it ({detail.strip()[:160]})"


def _wait_unreaped(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait up to ``timeout`` for ``proc`` to exit without reaping it (WNOWAIT): its pid stays
    taken until proc.wait()."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:  # reaped elsewhere
            return
        time.sleep(0.05)
