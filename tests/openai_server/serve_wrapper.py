"""A --serve command for the serving study's failure tests: runs llama-server with the arguments
after ``--``, and on request fails as a real server can.

``--fail-tp N``: a server asked for {tp} = N exits with code 3 before it listens (a server that
does not start). ``--die-once FLAG``: the first server of the study that creates FLAG kills its
llama-server (SIGKILL) when that has begun its 5th request, mid-run, and exits 137: a replica lost
while measured. The trigger is the server's own log line, never a time."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

START_LINE = "launch_slot_"  # llama-server's log line as a slot takes a request
DIE_AT = 5


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tp", type=int, required=True)
    p.add_argument("--fail-tp", type=int, default=None)
    p.add_argument("--die-once", default=None)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    args = p.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if args.fail_tp == args.tp:
        print(f"serve_wrapper: refusing tp={args.tp} (a server that does not start)", flush=True)
        return 3
    dies = False
    if args.die_once:
        try:
            os.close(os.open(args.die_once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            dies = True
        except FileExistsError:
            pass
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:
        sys.stdout.write(line)
        if dies and START_LINE in line:
            seen += 1
            if seen == DIE_AT:
                proc.send_signal(signal.SIGKILL)
                print("serve_wrapper: replica killed mid-run (SIGKILL)", flush=True)
                proc.wait()
                return 137
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
