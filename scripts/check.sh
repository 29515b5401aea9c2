#!/usr/bin/env bash
# The house's static checks (seconds; the first run after a clean clone builds mypy's cache):
#   ruff         E, F, I, UP, B and the engine's banned front-end imports (pyproject [tool.ruff])
#   mypy         at the lowest Python requires-python allows (pyproject [tool.mypy])
#   lint-imports the layer contracts: engine never imports tui/textual/rich; engine's and tui's
#                layers (pyproject [tool.importlinter]; docs/architecture.md draws them)
# All three run even when one fails, so one pass shows every finding; exit 1 when any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${VENV_BIN:-.venv/bin}
failed=()
"$BIN/ruff" check --quiet . || failed+=(ruff)
"$BIN/mypy" || failed+=(mypy)
"$BIN/lint-imports" --no-cache >/dev/null 2>&1 || { "$BIN/lint-imports" --no-cache | tail -n +13; failed+=(lint-imports); }
if [ ${#failed[@]} -gt 0 ]; then
  echo "check: failed: ${failed[*]}" >&2
  exit 1
fi
echo "check: ruff, mypy, lint-imports clean"
