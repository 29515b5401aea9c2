#!/usr/bin/env bash
# Set up everything gpuscale-tui needs in .venv/ (idempotent; re-runs only when pyproject changes):
# every extra ([all]: the embedded server, the probe, model export), the test tools ([test]) and
# llama.cpp's llama-server for the OpenAI API tests (scripts/build_llama_server.sh).
# A CPU-only box gets torch's CPU build; a GPU box gets the default (CUDA) build.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=.venv
STAMP="$VENV/.setup-$(sha1sum pyproject.toml scripts/setup.sh | sha1sum | cut -c1-12)"
[ -f "$STAMP" ] && exit 0

"$PY" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 14) else 1)' \
  || { echo "setup: Python 3.11-3.13 needed, found $("$PY" --version 2>&1)" >&2; exit 2; }
# pip is quiet (its output is pages long): these lines say what is being installed and how far
# it got, on stderr, so that a first run is not minutes of silence
say() { echo "setup: $*" >&2; }
started=$SECONDS
say "setting up .venv/ (once; again only when pyproject.toml changes)"
[ -x "$VENV/bin/python" ] || { say "creating .venv/ with $("$PY" --version 2>&1)"; "$PY" -m venv "$VENV"; }
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  # No GPU: the CPU build. TORCH_INDEX_URL may name PyTorch's CPU wheel index where the default
  # index would resolve torch to the CUDA build.
  say "step 1/3: torch ${TORCH_VERSION:-2.13.0}, CPU build (no GPU here; about 200 MB, a few minutes on a slow link)"
  if [ -n "${TORCH_INDEX_URL:-}" ]; then
    "${PIP[@]}" --index-url "$TORCH_INDEX_URL" "torch==${TORCH_VERSION:-2.13.0}"
  else
    "${PIP[@]}" "torch==${TORCH_VERSION:-2.13.0}"
  fi
fi
say "step 2/3: gpuscale-tui with every extra and the test tools (-e '.[all,test]': the embedded Triton server, torch, onnx, pytest ...)"
"${PIP[@]}" -e ".[all,test]"
# The real OpenAI-compatible server the tests start (docs/results/openai_server_choice.md): built
# from source once per machine, kept outside the clone; where it cannot be built, its tests skip.
say "step 3/3: llama.cpp's llama-server for the OpenAI API tests (once per machine, into ~/.cache/gpuscale-tui/: 3-8 minutes on 2 cores)"
if [ -f scripts/build_llama_server.sh ]; then
  PYTHON="$VENV/bin/python" bash scripts/build_llama_server.sh \
    || say "could not build llama-server: the OpenAI API tests will be skipped"
fi

# The tmux-driven UI test needs tmux, the --metrics-port test a Prometheus server; install them
# where we may (root with apt), else those tests are skipped and say why.
missing=()
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq "${missing[@]}") >/dev/null 2>&1 \
    || echo "setup: could not install ${missing[*]}" >&2
fi
rm -f "$VENV"/.setup-*
touch "$STAMP"
say "done in $((SECONDS - started)) s: .venv/bin/gpuscale-tui"
