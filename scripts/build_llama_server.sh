#!/usr/bin/env bash
# Build llama.cpp's OpenAI-compatible server (llama-server) for the tests' real server
# (tests/openai_server; docs/results/openai_server_choice.md says why this one and what it costs).
# The source is the llama.cpp that llama-cpp-python's sdist vendors, fetched from the package
# registry with pip; only the llama-server target is built, CPU only, statically linked, for this
# machine's CPU (GGML_NATIVE), no web UI, no curl, no OpenSSL, at -O1 (LLAMA_SERVER_OPT=-O3 for
# llama.cpp's own level: 580 CPU-seconds to build against 388, and twice the tiny model's decode
# rate; docs/results/openai_server_choice.md). The binary lands in the user's
# cache, outside the checkout, so that every clone on this machine (CI's fresh clone too) reuses it
# as pip reuses a wheel it built:
#   ${XDG_CACHE_HOME:-~/.cache}/gpuscale-tui/llama-server/llama-cpp-python-$VERSION$OPT/bin/llama-server
# where the tests' fixture looks for it (LLAMA_SERVER=PATH names another). Idempotent: a binary
# already built for this version is kept. JOBS (default: nproc) sets the build's parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
OPT=${LLAMA_SERVER_OPT:--O1}
OUT=${XDG_CACHE_HOME:-$HOME/.cache}/gpuscale-tui/llama-server/llama-cpp-python-$VERSION$OPT
BIN=$OUT/bin/llama-server
say() { echo "build_llama_server: $*" >&2; }
if [ -x "$BIN" ]; then say "$BIN is built"; exit 0; fi
command -v cmake >/dev/null && command -v c++ >/dev/null \
  || { say "needs cmake and a C++ compiler (apt-get install cmake g++)"; exit 2; }
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
started=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/llama-server-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
say "fetching llama-cpp-python $VERSION's source (llama.cpp inside it) from the package registry"
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
  "llama-cpp-python==$VERSION" -d "$work/dl" >/dev/null 2>&1 \
  || "$PY" -m pip download --disable-pip-version-check --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$work/dl"
mkdir -p "$work/src"
tar xzf "$work/dl/llama_cpp_python-$VERSION.tar.gz" -C "$work/src" --strip-components=3 \
  "llama_cpp_python-$VERSION/vendor/llama.cpp"
say "building llama-server $OPT (CPU, about 200 compile steps: 3-8 minutes on 2 cores)"
cmake -S "$work/src" -B "$work/build" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
  -DGGML_OPENMP=OFF "-DCMAKE_C_FLAGS_RELEASE=$OPT -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELEASE=$OPT -DNDEBUG" \
  ${LLAMA_CMAKE_ARGS:-} >"$work/cmake.log" 2>&1 \
  || { tail -n 30 "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/build" --target llama-server -j "${JOBS:-$(nproc)}" >"$work/build.log" 2>&1 \
  || { tail -n 30 "$work/build.log" >&2; exit 1; }
mkdir -p "$OUT/bin"
cp "$work/build/bin/llama-server" "$BIN.part" && mv "$BIN.part" "$BIN"
say "built $BIN in $((SECONDS - started)) s"
