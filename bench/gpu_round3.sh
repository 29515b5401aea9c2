#!/usr/bin/env bash
# Re-check after the warming fix and the CUDA IPC handle fix (issues 13, 14), on the box lent:
# VARIANTS/VARIANT default to the 1-GPU case (1x); on 2x H200 use VARIANTS=1x,2x VARIANT=2x.
source bench/gpu_env.sh
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
exec > >(tee "$OUT/round3.log") 2>&1
echo "=== transports, c=256"
timeout 110 $PY bench/transport_vs_perf_analyzer.py --variants "${VARIANTS:-1x}" --transports http,system_shm,cuda_shm \
  --levels 256 --rounds 1 --window-ms 1000 --max-windows 4
echo "transport exit $? at $(( $(date +%s) - t0 )) s"
echo "=== server threads at c=64: ours (warming) vs perf_analyzer"
timeout 70 $PY bench/diag_fidelity.py --variant "${VARIANT:-1x}" --cases "ours:64,pa:64" --window-ms 1000 --max-windows 4
echo "=== ours vs perf_analyzer"
timeout -k 5 215 $PY bench/load_vs_perf_analyzer.py --models openclip_vit_b32 --variant "${VARIANT:-1x}" --levels 16,64,128,256,512 \
  --rounds 3 --rates-of-peak 0.5,0.75 --window-ms 700 --max-windows 5 --pa-retries 0 --budget-s 195 --run-overhead-s 1.5 --server-start-s 20
echo "bench exit $? at $(( $(date +%s) - t0 )) s"
