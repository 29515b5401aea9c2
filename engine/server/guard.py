"""Keeps tritonserver from outliving us.

Run as ``python -m engine.server.guard -- tritonserver ARGS``, in a new session (its own process
group), with its stdin a pipe from the tool. The guard starts tritonserver in its group and
waits. When the pipe closes — the tool exited, crashed, or was killed with SIGKILL — or the guard
gets SIGTERM, it ends the whole group (tritonserver and its Python-backend stubs): SIGTERM, then
SIGKILL after a grace period. No orphaned tritonserver, whatever happens to the tool.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

GRACE_S = 10.0


def _end_group(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    # stubs and anything else left in our group
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(os.getpgid(0), signal.SIGKILL)


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: python -m engine.server.guard -- COMMAND [ARGS]", file=sys.stderr)
        return 2
    child = subprocess.Popen(argv[1:], stdin=subprocess.DEVNULL)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the tool, which stops us itself

    def watch_pipe() -> None:
        try:
            while sys.stdin.buffer.read(1):
                pass
        except OSError:
            pass
        stop.set()

    threading.Thread(target=watch_pipe, daemon=True).start()
    while not stop.is_set():
        if child.poll() is not None:
            break
        stop.wait(0.2)
    code = child.poll()
    if code is not None:
        print(f"[guard] tritonserver exited with code {code}", file=sys.stderr, flush=True)
    _end_group(child)  # also when tritonserver exited by itself: its stubs go with it
    return 0 if code is None else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
