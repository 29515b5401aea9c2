#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. Exit code 5 (no tests selected) counts as a
# failure unless ALLOW_NO_TESTS=1: a suite that runs nothing must not pass silently.
# The tests run on TEST_WORKERS pytest-xdist workers (default 3): most of the suite's time is real
# parts starting up (Triton, torch ranks, apps) and waiting on them, so even a 2-core box gains
# from a third worker. Each worker starts its own session-wide
# identity server; --dist loadgroup keeps the xdist_group("cpu_heavy") tests in one worker
# (tests/conftest.py). TEST_WORKERS=0 (or a later "-n 0" in the arguments) runs one process.
# --fast: the suite without the tests that start a real server or are marked slow (under a minute
# here); CI runs the whole suite.
set -uo pipefail
cd "$(dirname "$0")/.."
args=()
for a in "$@"; do
  if [ "$a" = --fast ]; then args+=(-m "not server and not slow"); else args+=("$a"); fi
done
set -- "${args[@]+"${args[@]}"}"
scripts/setup.sh || exit $?
scripts/check.sh || exit $?  # lint, types, layer contracts: seconds, and a failure stops here
.venv/bin/python -m pytest -q -n "${TEST_WORKERS:-3}" --dist loadgroup "$@"
code=$?
if [ "$code" = 5 ]; then
  echo "test: pytest selected no tests" >&2
  [ "${ALLOW_NO_TESTS:-0}" = 1 ] && exit 0
fi
exit "$code"
