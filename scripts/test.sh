#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. Exit code 5 (no tests selected) counts as a
# failure unless ALLOW_NO_TESTS=1: a suite that runs nothing must not pass silently.
# The tests run on TEST_WORKERS pytest-xdist workers (default 4): most of the suite's time is real
# parts starting up (Triton, torch ranks, apps) and driving them, and waiting for them (a Triton
# stop takes about 3 s), so a fourth worker uses CPU the other three leave idle. On a 2-core box its 2,768 tests
# took pytest 486 s idle and 664 s beside two CPU hogs (fresh clones, 2026-11-29); the time depends on
# the CPU the box leaves it: the tests wait for conditions, not for the clock, so a busy box
# (other jobs, CPU hogs) makes the run longer rather than red. The last line says how long this run took. Each worker starts its own session-wide
# identity server; --dist loadgroup keeps the xdist_group("cpu_heavy") tests in one worker
# (tests/conftest.py). TEST_WORKERS=0 (or a later "-n 0" in the arguments) runs one process.
# --fast: the suite without the tests that start a real server or are marked slow (about 31 s
# here, warm); CI runs the whole suite.
set -uo pipefail
cd "$(dirname "$0")/.."
args=()
for a in "$@"; do
  if [ "$a" = --fast ]; then args+=(-m "not server and not slow"); else args+=("$a"); fi
done
set -- "${args[@]+"${args[@]}"}"
scripts/setup.sh || exit $?
scripts/check.sh || exit $?  # lint, types, layer contracts: seconds, and a failure stops here
# pytest caches its assertion-rewritten test modules as bytecode (__pycache__/, git-ignored); with
# PYTHONDONTWRITEBYTECODE set, as on these boxes, every worker rewrites and compiles all of them
# again (about 7 s of CPU each, a quarter of the fast lane's CPU)
unset PYTHONDONTWRITEBYTECODE
started=$SECONDS
.venv/bin/python -m pytest -q --durations=30 -n "${TEST_WORKERS:-4}" --dist loadgroup "$@"
code=$?
echo "test: pytest took $((SECONDS - started)) s on $(nproc) cores (load average then: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a))" >&2
if [ "$code" = 5 ]; then
  echo "test: pytest selected no tests" >&2
  [ "${ALLOW_NO_TESTS:-0}" = 1 ] && exit 0
fi
exit "$code"
