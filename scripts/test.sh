#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. Exit code 5 (no tests selected) counts as a
# failure unless ALLOW_NO_TESTS=1: a suite that runs nothing must not pass silently.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit $?
scripts/check.sh || exit $?  # lint, types, layer contracts: seconds, and a failure stops here
.venv/bin/python -m pytest -q "$@"
code=$?
if [ "$code" = 5 ]; then
  echo "test: pytest selected no tests" >&2
  [ "${ALLOW_NO_TESTS:-0}" = 1 ] && exit 0
fi
exit "$code"
