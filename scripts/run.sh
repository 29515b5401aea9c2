#!/usr/bin/env bash
# Set up (if needed) and run the main job: the local profile on the embedded Triton server.
# In a terminal this opens the TUI; otherwise (or with --record) it runs headless.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh  # silent when .venv/ is ready; otherwise it says what it installs, step by step
echo "run: gpuscale-tui $*" >&2
exec .venv/bin/gpuscale-tui "$@"
