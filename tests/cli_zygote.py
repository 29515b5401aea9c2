"""A preloaded CLI for the suite: `python -m tui.cli ARGS` started by a test costs a fork, not
a fresh interpreter's imports.

The suite starts about 265 CLI processes; each spent about 0.4 CPU-s importing the engine, numpy
and the rest before its first line of work, a sixth of a whole run's CPU on 2 cores. Each pytest
worker starts one zygote (`serve`, on a socket of its own) that imports them once. A test's
`subprocess.Popen([sys.executable, "-m", "tui.cli", ...])` (or `-c` code that calls
`tui.cli.main`) is handed to a small client instead (tests/cli_zygote_client.py, stdlib only); it
passes the zygote its stdin, stdout and stderr, its arguments, environment and working folder. The
zygote forks a child that runs the command as `python` would have, and reports how it ended; the
client ends the same way (its exit code, or the signal that killed the child). Signals sent to the
client go on to the child (held until the child is known); a client killed outright (SIGKILL, a
test's timeout) takes its child with it.

Where a fork could not stand for a fresh interpreter, the client runs the real one (execv): a
process-group or session leader (start_new_session), a terminal on stdin/stdout/stderr, extra
open descriptors, other interpreter settings (PYTHON* variables, the locale) or other resource
limits. Tests marked `real_cli` always get the real one; GPUSCALE_TEST_ZYGOTE=0
turns the zygote off for a whole run. The real entry point stays covered: those tests, the
install lane, the tmux tests and every command a test runs through a shell.
"""

from __future__ import annotations

import array
import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from tests.cli_runner import exit_code

ROOT = Path(__file__).resolve().parents[1]
CLIENT = Path(__file__).with_name("cli_zygote_client.py")
SOCKET_ENV = "GPUSCALE_CLI_ZYGOTE"  # the zygote's socket, for the client
SWITCH_ENV = "GPUSCALE_TEST_ZYGOTE"  # "0": every CLI a fresh interpreter
# what a session imports before its first line of work (never textual or torch: a test may check
# that a headless run does without them)
PRELOAD = ("tui.cli", "tui.commands.run", "tui.commands.headless_session", "tui.commands.study", "tui.commands.server",
           "tui.commands.replay_recording", "tui.commands.export_recording", "tui.headless", "engine.session",
           "engine.profiles", "engine.record.exporters", "engine.record.reader", "engine.wire_check",
           "engine.triton.target_setup", "engine.triton.request_set", "engine.triton.input_synthetic",
           "engine.study.study_report", "numpy", "pynvml")
# interpreter settings read once at start: a client whose differ runs a real interpreter
STARTUP_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONWARNINGS", "PYTHONOPTIMIZE",
               "PYTHONHASHSEED", "PYTHONSAFEPATH", "PYTHONNOUSERSITE", "PYTHONFAULTHANDLER", "PYTHONDEVMODE",
               "PYTHONMALLOC", "PYTHONTRACEMALLOC", "PYTHONPROFILEIMPORTTIME", "PYTHONASYNCIODEBUG",
               "PYTHONUNBUFFERED", "PYTHONINSPECT", "PYTHONVERBOSE", "PYTHONDONTWRITEBYTECODE", "PYTHONINTMAXSTRDIGITS",
               "LANG", "LC_ALL", "LC_CTYPE")
CLI_CODE_MARK = "from tui.cli import main"  # `python -c CODE` that runs the CLI


# --------------------------------------------------------------------------- the test's side


def cli_args(args: Any) -> list[str] | None:
    """The interpreter arguments after sys.executable when ``args`` starts the CLI, else None."""
    if not isinstance(args, (list, tuple)) or len(args) < 3 or not all(isinstance(a, str) for a in args):
        return None
    if args[0] != sys.executable:
        return None
    if args[1] == "-m" and args[2] == "tui.cli":
        return list(args[1:])
    if args[1] == "-c" and CLI_CODE_MARK in args[2]:
        return list(args[1:])
    return None


class Zygote:
    """One worker's zygote: started on first use, stopped when the worker ends."""

    def __init__(self) -> None:
        self.path = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def ready(self, popen: Any) -> str | None:
        """The socket of a running zygote, started here the first time (``popen``: the real
        Popen class); None where it could not start (the CLI then runs as a fresh process)."""
        with self._lock:
            if self.proc is None:
                import tempfile

                self.path = str(Path(tempfile.mkdtemp(prefix="cli-zygote-")) / "cli.sock")
                env = {k: v for k, v in os.environ.items() if k != SOCKET_ENV}
                # started as `-c`, as a CLI run through `-c` finds __main__: with nothing of ours in it
                self.proc = popen([sys.executable, "-c", "import sys; from tests.cli_zygote import serve; serve(sys.argv[1])",
                                   self.path], cwd=ROOT, env=env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                atexit.register(self.stop)
                line = self.proc.stderr.readline() if self.proc.stderr else b""  # "ready", once its imports are done
                if line.strip() != b"ready":
                    self.proc.kill()
                    raise RuntimeError(f"the CLI zygote did not start: {line.decode(errors='replace')}")
            if self.proc.poll() is not None:
                return None
            return self.path

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(Path(self.path).parent, ignore_errors=True)


# --------------------------------------------------------------------------- the zygote


def _preload() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)


def _refusal(header: dict[str, Any]) -> str | None:
    """Why this zygote cannot stand for a fresh interpreter of the client's, or None."""
    env = header["env"]
    for key in STARTUP_ENV:
        if env.get(key) != os.environ.get(key):
            return f"{key} differs"
    import resource

    for name, limits in header["rlimits"].items():
        if list(resource.getrlimit(getattr(resource, name))) != limits:
            return f"{name} differs"
    return None


def _run_child(header: dict[str, Any], fds: list[int], sockets: list[socket.socket], pipe: tuple[int, int]) -> None:
    """In the forked child: become the client's `python ARGS`, then exit as python would."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    for sock in sockets:  # through the objects, so that no stale one closes a reused descriptor later
        sock.close()
    for fd in pipe:
        os.close(fd)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(header["cwd"])
    os.environ.clear()
    os.environ.update(header["env"])
    os.umask(header["umask"])
    for name in header["ignored"]:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    if "numpy" in sys.modules:  # its global generator would repeat in every child
        sys.modules["numpy"].random.seed()
    mode, *rest = header["argv"]
    code = 0
    try:
        if mode == "-m":
            import runpy

            sys.argv = ["-m", *rest[1:]]
            sys.path[0] = header["cwd"]
            sys.modules.pop(rest[0], None)  # python -m runs a module not yet imported (runpy warns otherwise)
            runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
        else:
            import __main__

            sys.argv = ["-c", *rest[1:]]
            sys.path[0] = ""
            for name in [n for n in vars(__main__) if not n.startswith("__")]:  # the zygote's own -c names
                delattr(__main__, name)
            exec(compile(rest[0], "<string>", "exec"), vars(__main__))
    except SystemExit as exc:
        code = exit_code(exc)
    except KeyboardInterrupt:  # python ends by SIGINT here
        traceback.print_exc()
        _finish()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    code = _finish() or code
    os._exit(code & 0xFF)


def _finish() -> int:
    """What python does on the way out: wait for non-daemon threads, run atexit, flush."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except BaseException:
        pass
    atexit._run_exitfuncs()
    code = 0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = 120
    return code


def serve(path: str) -> None:
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    parent = os.getppid()
    # child pid -> its client's connection (None once the client went away and the child was killed)
    children: dict[int, socket.socket | None] = {}
    sys.stderr.write("ready\n")
    sys.stderr.flush()
    log = os.open(Path(path).with_name("zygote.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(log, 2)  # nobody reads the pipe after "ready"
    os.close(log)
    while os.getppid() == parent:
        clients = {conn: pid for pid, conn in children.items() if conn is not None}
        watched: list[Any] = [listener, wake_r, *clients]
        ready, _, _ = select.select(watched, [], [], 5.0)
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                clients.pop(conn, None)
                report = ({"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status)
                          else {"code": os.waitstatus_to_exitcode(status)})
                try:
                    conn.send(json.dumps(report).encode())
                except OSError:
                    pass
                conn.close()
        for conn in [c for c in ready if c in clients]:  # the client went away: its child goes too
            try:
                os.kill(clients[conn], signal.SIGKILL)
            except ProcessLookupError:
                pass
            children[clients[conn]] = None
            conn.close()
        if listener in ready:
            conn, _ = listener.accept()
            try:
                message, ancillary, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * 4))
                fds = array.array("i")
                for level, kind, data in ancillary:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                        fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
                header = json.loads(message)
                why = _refusal(header) if len(fds) == 3 else "no descriptors"
            except (OSError, ValueError) as exc:
                conn.close()
                sys.stderr.write(f"a client's request failed: {exc}\n")
                continue
            if why is not None:
                conn.send(json.dumps({"refused": why}).encode())
                conn.close()
                for fd in fds:
                    os.close(fd)
                continue
            pid = os.fork()
            if pid == 0:
                try:
                    _run_child(header, list(fds), [listener, conn, *clients], (wake_r, wake_w))
                finally:
                    os._exit(70)
            for fd in fds:
                os.close(fd)
            children[pid] = conn
            conn.send(json.dumps({"pid": pid}).encode())
