"""The client of the suite's CLI zygote (tests/cli_zygote.py): `python -S cli_zygote_client.py
-m tui.cli ARGS` (or `-c CODE ARGS`) ends as `python -m tui.cli ARGS` would have. Standard
library only, and no site: it is a process per CLI the suite starts."""

import array
import json
import os
import resource
import signal
import socket
import sys

RLIMITS = ("RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA",
           "RLIMIT_STACK", "RLIMIT_NPROC")
TRACE = "GPUSCALE_ZYGOTE_TRACE"  # a file: one line a CLI, where it ran and why (for the suite's accounts)
FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH", "SIGCONT", "SIGALRM")


def _signals() -> list[signal.Signals]:
    return [getattr(signal, name) for name in FORWARDED]


def _real(argv: list[str], why: str = "") -> None:
    """The real interpreter, in this process (a signal that came meanwhile is delivered first, as
    to a python still starting)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _signals())
    if os.environ.get(TRACE):
        with open(os.environ[TRACE], "a") as f:
            f.write(f"real {why} {argv[:3]}\n")
    env = {k: v for k, v in os.environ.items() if k != "GPUSCALE_CLI_ZYGOTE"}
    os.execve(sys.executable, [sys.executable, *argv], env)


def _extra_fds() -> bool:
    """Whether the caller passed descriptors beyond stdin, stdout and stderr (pass_fds)."""
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            try:
                os.fstat(int(name))  # the listing's own descriptor is closed by now
            except OSError:
                continue
            return True
    return False


def main() -> None:
    # held until the child is known: a signal sent as soon as the child has printed must reach it
    signal.pthread_sigmask(signal.SIG_BLOCK, _signals())
    argv = sys.argv[1:]
    path = os.environ.get("GPUSCALE_CLI_ZYGOTE", "")
    # a fork of the zygote could not stand for a fresh interpreter here
    if (not path or os.getpgrp() == os.getpid() or os.getsid(0) == os.getpid()
            or any(os.isatty(fd) for fd in (0, 1, 2))):
        _real(argv, f"path={bool(path)} pg={os.getpgrp() == os.getpid()} tty={[os.isatty(fd) for fd in (0, 1, 2)]}")
    if _extra_fds():
        _real(argv, "fds " + str(os.listdir("/proc/self/fd")))
    ignored = [name for name in FORWARDED if signal.getsignal(getattr(signal, name)) == signal.SIG_IGN]
    umask = os.umask(0o022)
    os.umask(umask)
    header: dict[str, object] = {
        "argv": argv,
        "env": {k: v for k, v in os.environ.items() if k != "GPUSCALE_CLI_ZYGOTE"},
        "cwd": os.getcwd(),
        "umask": umask,
        "rlimits": {name: list(resource.getrlimit(getattr(resource, name))) for name in RLIMITS},
        "ignored": ignored,
    }
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(path)
        sock.sendmsg([json.dumps(header).encode()],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
        reply = json.loads(sock.recv(1 << 16) or b"{}")
    except (OSError, ValueError):
        reply = {}
    if "pid" not in reply:  # refused, or the zygote is gone
        sock.close()
        _real(argv, str(reply))
    child = reply["pid"]
    if os.environ.get(TRACE):
        with open(os.environ[TRACE], "a") as f:
            f.write(f"zygote {argv[:3]}\n")

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    # every one, whatever this process inherited: the child starts with the same dispositions,
    # and the command may handle a signal its parent ignored (an xdist worker's SIGINT)
    for sig in _signals():
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _signals())
    data = sock.recv(1 << 16)
    end = json.loads(data) if data else {"code": 70}  # the zygote died under its child
    if "signal" in end:
        signal.signal(end["signal"], signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [end["signal"]])
        os.kill(os.getpid(), end["signal"])
        os._exit(128 + end["signal"])
    os._exit(end["code"] & 0xFF)


if __name__ == "__main__":
    main()
