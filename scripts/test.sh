#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. Exit code 5 (no tests selected) counts as a
# failure unless ALLOW_NO_TESTS=1: a suite that runs nothing must not pass silently.
# Two lanes, side by side: the main lane on TEST_WORKERS pytest-xdist workers (default 8), and the
# install lane (tests marked `install`: a fresh venv with the core only, built from the package
# index; its minute is mostly pip waiting on the network, so it runs beside the main lane rather
# than in one of its workers). Most of the main lane's time is real parts starting up (Triton,
# torch ranks, apps) and driving them, and waiting for them (a Triton stop takes about 3 s): with
# 4 workers a 2-core box sat idle for 184 of the run's CPU-seconds, with 6 for 98; the run's CPU,
# about 565 CPU-s, sets its time (the longest work goes first: tests/schedule.py; a test's CLI is a
# fork of a preloaded interpreter: tests/cli_zygote.py). On a 2-core box its 2,812 tests took
# 290-313 s idle and 359-360 s beside two CPU hogs by this script's count, from fresh clones on 8
# workers (2026-11-29);
# the time depends on the CPU the box leaves it: the tests wait for conditions,
# not for the clock, so a busy box (other jobs, CPU hogs) makes the run longer rather than red.
# The last lines say how long each lane took. Each worker starts its
# own session-wide identity server; --dist loadgroup keeps each xdist_group ("cpu_heavy",
# "cpu_study") in one worker, and the tests that share a costly fixture in one (tests/conftest.py).
# TEST_WORKERS=0 (or a later "-n 0" in the arguments) runs one process.
# --fast: the suite without the tests that start a real server or are marked slow, on 4 workers
# (26 s here, warm). --install: the install lane alone. Other arguments go to the main
# lane's pytest, and then the install lane runs only if asked. CI runs both lanes.
set -uo pipefail
cd "$(dirname "$0")/.."
args=()
install=0
workers=${TEST_WORKERS:-8}
for a in "$@"; do
  case "$a" in
    --fast) args+=(-m "not server and not slow"); workers=${TEST_WORKERS:-4} ;;
    --install) install=1 ;;
    *) args+=("$a") ;;
  esac
done
set -- "${args[@]+"${args[@]}"}"
scripts/setup.sh || exit $?
scripts/check.sh || exit $?  # lint, types, layer contracts: seconds, and a failure stops here
# pytest caches its assertion-rewritten test modules as bytecode (__pycache__/, git-ignored); with
# PYTHONDONTWRITEBYTECODE set, as on these boxes, every worker rewrites and compiles all of them
# again (about 7 s of CPU each, a quarter of the fast lane's CPU)
unset PYTHONDONTWRITEBYTECODE

no_tests() {  # pytest's exit code 5: nothing selected
  echo "test: $1 selected no tests" >&2
  [ "${ALLOW_NO_TESTS:-0}" = 1 ] && return 0
  return 5
}

install_lane() {  # the install lane's pytest; its own output, then how long it took
  local started=$SECONDS code tmp
  # its own TMPDIR: its check for leftovers (tests/conftest.py) then sees its own servers' folders,
  # not those the main lane's servers are making or removing beside it
  tmp=$(mktemp -d)
  TMPDIR=$tmp .venv/bin/python -m pytest -q -p no:xdist -m install tests/test_core_install.py
  code=$?
  rm -rf "$tmp"
  echo "test: the install lane took $((SECONDS - started)) s" >&2
  [ "$code" = 5 ] && { no_tests "the install lane"; return $?; }
  return "$code"
}

if [ "$install" = 1 ] && [ $# = 0 ]; then
  install_lane
  exit $?
fi
install_log=""
if [ $# = 0 ] || [ "$install" = 1 ]; then
  install_log=$(mktemp)
  install_lane > "$install_log" 2>&1 &
  install_pid=$!
fi
started=$SECONDS
# A fresh checkout has no assertion-rewritten test modules cached: each worker would rewrite all of
# them at once (a fresh clone's 8 workers spent 46 CPU-s starting against 15 warm). One collection
# writes them first; its time counts in the lane's.
if ! compgen -G "tests/tui/__pycache__/test_state.*-pytest-*.pyc" > /dev/null; then  # one the install lane skips
  .venv/bin/python -m pytest -q --collect-only > /dev/null 2>&1
fi
main=(-m "not install")
[ $# -gt 0 ] && main=()  # arguments given: they choose the tests (a later -m wins anyway)
.venv/bin/python -m pytest -q --durations=30 -n "$workers" --dist loadgroup --no-loadscope-reorder "${main[@]+"${main[@]}"}" "$@"
code=$?
echo "test: pytest took $((SECONDS - started)) s on $(nproc) cores (load average then: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a))" >&2
if [ "$code" = 5 ]; then
  no_tests "pytest"
  code=$?
fi
if [ -n "$install_log" ]; then
  wait "$install_pid"
  install_code=$?
  echo "--- the install lane ---" >&2
  cat "$install_log" >&2
  rm -f "$install_log"
  [ "$code" = 0 ] && code=$install_code
fi
exit "$code"
