#!/usr/bin/env bash
# The 2x H200 re-check after the warming and IPC-handle fixes, kept to two minutes: our cuda_shm
# against perf_analyzer's on the 2x variant, and ours vs perf_analyzer at c=64 and 128 (2 rounds).
source bench/gpu_env.sh
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/round4.log") 2>&1
timeout 60 $PY bench/transport_vs_perf_analyzer.py --variants 2x --transports cuda_shm --levels 256 --rounds 1 --window-ms 800 --max-windows 4
timeout -k 5 80 $PY bench/load_vs_perf_analyzer.py --models openclip_vit_b32 --variant 2x --levels 64,128 --rounds 2 \
  --window-ms 700 --max-windows 4 --pa-retries 0 --budget-s 70 --run-overhead-s 1.5 --server-start-s 20
