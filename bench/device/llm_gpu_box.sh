#!/usr/bin/env bash
# The LLM runs on a GPU box without network, with llama.cpp's llama-server built there from the
# trimmed source in .carry-llm/ (bench/device/llm_carry.sh packs it), each step bounded, its
# output under $OUT as it comes. Steps run in the order given:
#   build    CUDA build of llama-server alone (sm_$CUDA_ARCH, FA for f16 K/V only), its seconds in
#            build.txt; the stripped binary xz'd into $OUT/llama-server.xz.N (15 MiB parts) for the
#            next call: put them in .carry-llm/bin/ and carry .carry-llm
#   join     the binary from .carry-llm/bin/llama-server.xz.* (done by traffic/study when needed)
#   traffic  one GPU: prefix-heavy against prefix-free traffic of the same lengths, each on a fresh
#            server (as docs/results/llm_traffic_cpu.md), a random-weight f16 llama (bench/llm_model.py)
#   study    two GPUs: study --serve over tp1, tp2 (--split-mode $SPLIT) and 1*2, priced from
#            2x_h200 (1-GPU boxes at 1x_h200's price)
#   e.g.  bash bench/device/llm_gpu_box.sh build traffic     bash bench/device/llm_gpu_box.sh study
# Here, without a GPU: GPUS= LLAMA_SERVER=~/.cache/.../llama-server bash bench/device/llm_gpu_box.sh traffic study
# (the tests' CPU build, a small model, 1 thread a server, short levels).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-.bench-out}; mkdir -p "$OUT"
# under build/ (git-ignored): a warm box keeps it between calls, so a build cut short resumes there
W=${LLM_WORK:-$ROOT/build/gpuscale-llm}; mkdir -p "$W/logs"
PY=${PYTHON:-python3}
CARRY=${CARRY_LLM:-.carry-llm}
if [ -z "${GPUS+x}" ]; then GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
GPUS=${GPUS:-0}
# llama-server's host-RAM prompt cache saves each finished slot (about 250 MiB for the 0.8 B model's
# 2,000-token prompts) on its one main thread: about 200 ms a request, the GPU 17 % busy. Off on a
# GPU unless LLM_EXTRA says otherwise (docs/results/llm_gpu_2xh200.md measures both).
if [ "$GPUS" -gt 0 ] && [ -z "${LLM_EXTRA+x}" ]; then export LLM_EXTRA="--cache-ram 0"; fi
LLAMA_SERVER=${LLAMA_SERVER:-$W/llama-server}
export LLAMA_SERVER
say() { echo "[$(date +%T) +$SECONDS s] $*"; }
{ nvidia-smi -L; nproc; free -g | head -2; nvcc --version | tail -2; cmake --version | head -1; "$PY" -V; } > "$OUT/machine.txt" 2>&1
# CUDA's libraries for the binary where the loader does not find them by itself
for d in /usr/local/cuda/lib64 ${CUDA_HOME:+$CUDA_HOME/lib64}; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d
done
# the carried wheels whose module this Python lacks, unpacked (a wheel is a zip) ahead on PYTHONPATH
SITE=$W/site; mkdir -p "$SITE"
"$PY" - "$CARRY/wheels" "$SITE" <<'PYEOF' >> "$OUT/machine.txt" 2>&1
import importlib.util, sys, zipfile, pathlib
mods = {"gguf": "gguf", "pyyaml": "yaml", "msgspec": "msgspec", "psutil": "psutil", "prometheus_client": "prometheus_client"}
for w in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    m = mods.get(w.name.split("-")[0].lower())
    if m and importlib.util.find_spec(m) is None:
        zipfile.ZipFile(w).extractall(sys.argv[2]); print("unpacked", w.name)
PYEOF
export PYTHONPATH=$ROOT:$SITE${PYTHONPATH:+:$PYTHONPATH}
# our engine, headless, without textual (as bench/device/two_gpu_box.sh)
P='import sys; sys.modules["textual"] = None; from bench.common import device_environment; device_environment(); from tui.cli import main; sys.exit(main(sys.argv[1:]))'
export GPUSCALE_NUMPY1_VENV=1

build() {
  local b=$W/build t0=$SECONDS
  if [ ! -f "$W/src/llama.cpp/CMakeLists.txt" ]; then
    mkdir -p "$W/src"; tar -C "$W/src" -xJf "$CARRY/llama.cpp.tar.xz" || { say "no $CARRY/llama.cpp.tar.xz"; return 1; }
  fi
  say "configure (CUDA arch ${CUDA_ARCH:-90}, FA ${FA:-ON} f16 K/V only, static llama libs)"
  timeout -k 10 120 cmake -S "$W/src/llama.cpp" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" -DGGML_NATIVE=OFF -DGGML_CUDA_FA="${FA:-ON}" \
    -DGGML_CUDA_FA_QUANTS=f16-f16 -DGGML_CUDA_COMPRESSION_MODE=none -DGGML_CUDA_NCCL="${NCCL:-ON}" \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF ${LLAMA_CMAKE_ARGS:-} \
    > "$W/logs/cmake.log" 2>&1 || { say "configure failed"; tail -40 "$W/logs/cmake.log"; return 1; }
  grep -iE "cuda|nccl|warning" "$W/logs/cmake.log" | head -20
  say "configured in $((SECONDS - t0)) s; building llama-server with -j ${JOBS:-$(nproc)}"
  local t1=$SECONDS
  timeout -k 10 "${BUILD_S:-420}" cmake --build "$b" --target llama-server -j "${JOBS:-$(nproc)}" > "$W/logs/build.log" 2>&1
  local rc=$?
  say "build exit $rc after $((SECONDS - t1)) s ($(grep -c '^\[' "$W/logs/build.log") steps logged); last lines:"
  tail -5 "$W/logs/build.log"
  [ $rc -eq 0 ] || { grep -B2 -A10 -m3 "error" "$W/logs/build.log" | head -60; return 1; }
  strip -o "$W/llama-server" "$b/bin/llama-server" && chmod +x "$W/llama-server"
  ls -la "$b/bin/llama-server" "$W/llama-server"; ldd "$W/llama-server"
  xz -T0 -2 -c "$W/llama-server" > "$W/llama-server.xz" && split -b 15M -d -a 1 "$W/llama-server.xz" "$OUT/llama-server.xz."
  ls -la "$OUT"/llama-server.xz.*; sha256sum "$W/llama-server"
  say "build step done in $((SECONDS - t0)) s"
}

join() {
  [ -x "$LLAMA_SERVER" ] && return 0
  ls "$CARRY"/bin/llama-server.xz.* >/dev/null 2>&1 || { say "no llama-server: run build, or put its parts in $CARRY/bin/"; return 1; }
  cat "$CARRY"/bin/llama-server.xz.* | xz -dc > "$LLAMA_SERVER.part" && chmod +x "$LLAMA_SERVER.part" && mv "$LLAMA_SERVER.part" "$LLAMA_SERVER"
  sha256sum "$LLAMA_SERVER"; ldd "$LLAMA_SERVER" | grep -i "not found"; return 0
}

model() {  # the model and its size: about 0.8 B parameters in f16 on a GPU, a small one on a CPU
  export LLM_MODEL=$W/model-$1.gguf
  [ -s "$LLM_MODEL" ] && return 0
  # shellcheck disable=SC2086
  timeout -k 5 180 "$PY" -m bench.llm_model "$LLM_MODEL" $2
}

gpu_log() {  # GPU use every second while a step lasts
  [ "$GPUS" -gt 0 ] || return 0
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,power.draw --format=csv -l 1 > "$W/logs/gpu-$1.csv" 2>&1 &
  GPU_LOG=$!
}

traffic() {
  join || return 1
  local sargs levels par prof
  if [ "$GPUS" -gt 0 ]; then
    model gpu "${LLM_MODEL_ARGS:---embd 2048 --layers 16 --ff 5632 --heads 16}" || return 1
    par=${PAR:-16}; levels=${LEVELS:-1,4,16}; sargs=(-ngl 999 --split-mode none); prof=(--profile 1x_h200)
    export CUDA_VISIBLE_DEVICES=${TRAFFIC_GPU:-0}
  else
    model cpu "${LLM_MODEL_ARGS:---embd 128 --layers 2 --ff 256 --heads 2}" || return 1
    par=${PAR:-4}; levels=${LEVELS:-1,4}; sargs=(-t 1 -tb 1); prof=(--set hardware.cost_per_hour=1)
  fi
  local common=(--headless --no-check "${prof[@]}" --set model.name=gpuscale-llm --set load.concurrency="$levels" --set load.output_tokens=16
    --set load.window_ms="${WINDOW_MS:-3000}" --set load.max_windows="${MAX_WINDOWS:-6}" --set load.contended_percent=100
    --set load.max_trials=1)
  local name wl port=18088 srv
  gpu_log traffic
  for name in prefix-free prefix-heavy; do
    case $name in
      prefix-free) wl=(--set load.input_tokens=320) ;;
      prefix-heavy) wl=(--set load.prefix_groups=4 --set load.prefix_tokens=300 --set load.input_tokens=20) ;;
    esac
    say "== $name: a fresh llama-server, $par slots, context $((par * 2560)), levels $levels"
    "$LLAMA_SERVER" -m "$LLM_MODEL" --alias gpuscale-llm --host 127.0.0.1 --port $port --ctx-size $((par * 2560)) \
      --parallel "$par" --metrics "${sargs[@]}" ${LLM_EXTRA:-} > "$W/logs/server-$name.log" 2>&1 &
    srv=$!
    local t=0
    until curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null; do
      sleep 0.5; t=$((t + 1))
      if ! kill -0 $srv 2>/dev/null || [ $t -gt 240 ]; then say "server did not come up"; tail -20 "$W/logs/server-$name.log"; kill $srv 2>/dev/null; return 1; fi
    done
    say "server up after $((t / 2)) s"
    timeout -k 10 "${TRAFFIC_S:-150}" "$PY" -c "$P" --url "http://127.0.0.1:$port/v1" "${common[@]}" "${wl[@]}" -o "$W/rec/$name"
    say "$name exit $?"
    grep -E "offloaded|CUDA[0-9]|model params|flash_attn|n_ctx_seq|fattn|error" "$W/logs/server-$name.log" | head -12
    echo "server's prompt evals: $(grep -c 'prompt eval time' "$W/logs/server-$name.log"), last: $(grep 'prompt eval time' "$W/logs/server-$name.log" | tail -1 | sed 's/.*prompt eval/prompt eval/')"
    kill $srv; wait $srv 2>/dev/null
  done
  [ -n "${GPU_LOG:-}" ] && kill "$GPU_LOG" 2>/dev/null
  tar -C "$W" -czf "$OUT/traffic.tgz" rec logs 2>/dev/null
}

study() {
  join || return 1
  local prof slo levels
  export PAR=${PAR:-8} SPLIT=${SPLIT:-tensor}
  if [ "$GPUS" -gt 0 ]; then
    model gpu "${LLM_MODEL_ARGS:---embd 2048 --layers 16 --ff 5632 --heads 16}" || return 1
    export CTX=$((PAR * 2048)); unset CUDA_VISIBLE_DEVICES
    prof=(--profile 2x_h200 --cost 1=3.50); slo=${SLO:-ttft_p99=300ms,e2e_p99=3s}; levels=${LEVELS:-1,8,32}
  else
    model cpu "${LLM_MODEL_ARGS:---embd 128 --layers 2 --ff 256 --heads 2}" || return 1
    export CTX=$((PAR * 2048))
    prof=(--cost 1=0.05 --cost 2=0.10); slo=${SLO:-ttft_p99=2s,e2e_p99=5s}; levels=${LEVELS:-1,4}
  fi
  say "== study: tp1, tp2 (--split-mode $SPLIT), 1*2; $PAR slots a server; levels $levels; SLO $slo"
  gpu_log study
  timeout -k 15 "${STUDY_S:-480}" "$PY" -c "$P" study --record -o "$W/study" "${prof[@]}" --set model.name=gpuscale-llm \
    --serve "bash $ROOT/bench/device/llama_serve.sh {port} {tp} {gpus}" --variants tp1,tp2,1*2 --slo "$slo" \
    --search-steps "${SEARCH_STEPS:-1}" --serve-start-budget 180 \
    --set load.concurrency="$levels" --set load.output_tokens=64 --set load.input_tokens=128 \
    --set load.window_ms="${WINDOW_MS:-2000}" --set load.max_windows="${MAX_WINDOWS:-6}" --set load.warmup_s=2 \
    --set load.contended_percent=100 --set load.max_trials=1
  local rc=$?
  say "study exit $rc"
  [ -n "${GPU_LOG:-}" ] && kill "$GPU_LOG" 2>/dev/null
  tar -C "$W" -czf "$OUT/study.tgz" study logs 2>/dev/null
  return $rc
}

[ $# -gt 0 ] || set -- build traffic
for step in "$@"; do
  case $step in
    build) build > "$OUT/build.txt" 2>&1; echo "build exit $?" >> "$OUT/build.txt" ;;
    join) join ;;
    traffic) traffic > "$OUT/traffic.txt" 2>&1; echo "traffic exit $?" >> "$OUT/traffic.txt" ;;
    study) study > "$OUT/study.txt" 2>&1; echo "study exit $?" >> "$OUT/study.txt" ;;
    *) echo "unknown step $step (build, join, traffic, study)" >&2; exit 2 ;;
  esac
done
