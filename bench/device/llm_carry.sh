#!/usr/bin/env bash
# Pack what the LLM runs on a GPU box without network need (bench/device/llm_gpu_box.sh) into
# .carry-llm/ (git-ignored: add `/.carry-llm/` to .git/info/exclude), in the checkout that travels:
#   llama.cpp.tar.xz  llama.cpp as llama-cpp-python's sdist vendors it, trimmed to what a CUDA (or
#                     CPU) build of llama-server alone compiles: the top CMake files, ggml with its
#                     CPU and CUDA backends, src, include, common, vendor (no miniaudio sample
#                     files), tools/server, tools/mtmd and tools/ui's CMake files (no web UI
#                     sources: LLAMA_BUILD_UI=OFF), and a tools/CMakeLists.txt naming only those
#   wheels/           gguf and PyYAML (gguf imports it) for the model writer (bench/llm_model.py),
#                     and our core dependencies a box's Python may lack (msgspec, psutil,
#                     prometheus_client), for the box's Python 3.12; llm_gpu_box.sh unpacks only
#                     those whose module the box lacks
# Idempotent; regenerate after a llama-cpp-python version change:  bash bench/device/llm_carry.sh
#   LLAMA_CPP_PYTHON_VERSION (default 0.3.36)  PYTHON (default .venv/bin/python)  BOX_PY (3.12)
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
PY=${PYTHON:-.venv/bin/python}; [ -x "$PY" ] || PY=python3
BOX_PY=${BOX_PY:-3.12}
DEST=${CARRY_LLM:-.carry-llm}
say() { echo "llm_carry: $*" >&2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/llm-carry.XXXXXX"); trap 'rm -rf "$work"' EXIT
mkdir -p "$DEST/wheels"
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
  "llama-cpp-python==$VERSION" -d "$work/dl" 2>/dev/null \
  || "$PY" -m pip download --disable-pip-version-check --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$work/dl"
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: gguf -d "$DEST/wheels" 2>/dev/null
for w in msgspec psutil prometheus_client pyyaml; do
  "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: --python-version "$BOX_PY" \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 "$w" -d "$DEST/wheels" 2>/dev/null \
    || say "no $w wheel for Python $BOX_PY"
done
mkdir -p "$work/x"
tar xzf "$work/dl/llama_cpp_python-$VERSION.tar.gz" -C "$work/x" --strip-components=2 "llama_cpp_python-$VERSION/vendor/llama.cpp"
s=$work/x/llama.cpp
# ggml: keep the CPU and CUDA backends, drop the other backends' trees
for d in "$s"/ggml/src/ggml-*/; do
  case $(basename "$d") in ggml-cpu|ggml-cuda) ;; *) rm -rf "$d" ;; esac
done
# CMake's ggml_add_backend() only looks at backends that are switched on; none of the dropped ones is
rm -rf "$s"/{docs,models,media,examples,tests,benches,pocs,conversion,gguf-py,requirements,grammars,ci,skills,app,.devops,.github}
rm -rf "$s"/tools/ui/{src,static,tests,scripts} "$s"/tools/server/{tests,bench,README*.md} "$s"/tools/mtmd/{tests,test-*.mp3,test-*.mp4,test-*.png,*.jpg}
find "$s/scripts" -type f ! -name '*.cmake' -delete
find "$s/tools" -mindepth 1 -maxdepth 1 -type d ! -name server ! -name mtmd ! -name ui -exec rm -rf {} +
rm -f "$s"/vendor/miniaudio/*.c 2>/dev/null || true
cat > "$s/tools/CMakeLists.txt" <<'CM'
# trimmed by bench/device/llm_carry.sh: llama-server and what it links, nothing else
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(ui)
add_subdirectory(mtmd)
add_subdirectory(server)
CM
find "$s" -name '*.py' -path '*/scripts/*' -delete
tar -C "$work/x" -cJf "$DEST/llama.cpp.tar.xz.part" llama.cpp && mv "$DEST/llama.cpp.tar.xz.part" "$DEST/llama.cpp.tar.xz"
echo "$VERSION" > "$DEST/llama-cpp-python.version"
say "$(du -sh "$DEST" | cut -f1) in $DEST: $(ls "$DEST" "$DEST/wheels" | tr '\n' ' ')"
