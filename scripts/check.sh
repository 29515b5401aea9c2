#!/usr/bin/env bash
# The house's static checks (seconds; the first run after a clean clone builds mypy's cache):
#   ruff         E, F, I, UP, B and the engine's banned front-end imports (pyproject [tool.ruff])
#   mypy         at the lowest Python requires-python allows (pyproject [tool.mypy])
#   lint-imports the layer contracts: engine never imports tui/textual/rich; engine's and tui's
#                layers (pyproject [tool.importlinter]; docs/architecture.md draws them)
#   resolve      the core's requirements (pyproject [project] dependencies: a remote client)
#                resolve with binary wheels for macOS arm64 and x86_64 and Linux aarch64, on
#                Python 3.11-3.13 (pip install --dry-run --only-binary=:all: --platform ...). It
#                asks the package registry: GPUSCALE_SKIP_RESOLVE=1 skips it on an offline box.
#                Once it passed, it runs again only when the dependencies change (a stamp in
#                the venv, as scripts/setup.sh keeps; a fresh CI venv always runs it).
# All run even when one fails, so one pass shows every finding; exit 1 when any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${VENV_BIN:-.venv/bin}
failed=()
"$BIN/ruff" check --quiet . || failed+=(ruff)
"$BIN/mypy" || failed+=(mypy)
"$BIN/lint-imports" --no-cache >/dev/null 2>&1 || { "$BIN/lint-imports" --no-cache | tail -n +13; failed+=(lint-imports); }

resolve_core() {  # one platform and Python: silent when it resolves, else pip's last lines
  local platform=$1 python=$2 target out
  target=$(mktemp -d)
  if ! out=$("$BIN/python" -m pip install --dry-run --quiet --disable-pip-version-check --ignore-installed \
      --retries 1 --timeout 20 --only-binary=:all: --platform "$platform" --python-version "$python" \
      --target "$target" "${CORE[@]}" 2>&1); then
    echo "resolve: the core does not resolve for $platform, Python $python:"
    grep -v "^WARNING: Location" <<<"$out" | tail -n 3 | cut -c1-240 | sed 's/^/  /'
    rm -rf "$target"; return 1
  fi
  rm -rf "$target"
}
mapfile -t CORE < <("$BIN/python" -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"], sep="\n")')
STAMP="$BIN/../.resolved-$(printf '%s\n' "${CORE[@]}" | cat - scripts/check.sh | sha1sum | cut -c1-12)"
if [ "${GPUSCALE_SKIP_RESOLVE:-0}" = 1 ]; then
  resolved="core resolution SKIPPED (GPUSCALE_SKIP_RESOLVE=1)"
elif [ -f "$STAMP" ]; then
  resolved="core resolves for macOS arm64/x86_64 and Linux aarch64 (checked for these dependencies)"
else
  logs=$(mktemp -d) pids=()
  for platform in macosx_11_0_arm64 macosx_10_15_x86_64 manylinux2014_aarch64; do
    for python in 3.11 3.12 3.13; do  # in parallel: each waits mostly on the registry
      resolve_core "$platform" "$python" >"$logs/$platform-$python" & pids+=($!)
    done
  done
  bad=0
  for pid in "${pids[@]}"; do wait "$pid" || bad=1; done
  cat "$logs"/* >&2
  rm -rf "$logs"
  if [ "$bad" = 1 ]; then
    echo "resolve: is the package registry reachable? (offline: GPUSCALE_SKIP_RESOLVE=1 skips this check)" >&2
    failed+=(resolve)
  else
    rm -f "$BIN"/../.resolved-*
    touch "$STAMP"
  fi
  resolved="core resolves for macOS arm64/x86_64 and Linux aarch64, Python 3.11-3.13"
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "check: failed: ${failed[*]}" >&2
  exit 1
fi
echo "check: ruff, mypy, lint-imports clean; $resolved"
