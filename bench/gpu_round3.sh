#!/usr/bin/env bash
# Re-check on 2x H200 after the warming fix and the CUDA IPC handle fix (issues 13, 14).
source bench/gpu_env.sh
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
exec > >(tee "$OUT/round3.log") 2>&1
echo "=== transports http and cuda_shm, 1x and 2x, c=256"
timeout 130 $PY bench/transport_vs_perf_analyzer.py --variants 1x,2x --transports http,cuda_shm --levels 256 --rounds 1 \
  --window-ms 1000 --max-windows 4
echo "transport exit $? at $(( $(date +%s) - t0 )) s"
echo "=== ours vs perf_analyzer, 2x"
timeout -k 5 235 $PY bench/load_vs_perf_analyzer.py --models openclip_vit_b32 --variant 2x --levels 16,64,128,256,512 \
  --rounds 3 --rates-of-peak 0.5,0.75 --window-ms 700 --max-windows 5 --pa-retries 0 --budget-s 215 --run-overhead-s 1.5 --server-start-s 30
echo "bench exit $? at $(( $(date +%s) - t0 )) s"
