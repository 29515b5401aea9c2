#!/usr/bin/env bash
# One call on a lent 2x H200 box (issues 13, 14, 19): the box check across 2 GPUs, our transports
# against perf_analyzer's shared-memory modes at 1x and 2x, then bench/gpu_fidelity2.sh (ours vs
# perf_analyzer at c=16..512 and in rate mode on the 2x variant, identity CPU per request).
# About 9 minutes. Usage (device): bash bench/gpu_round2.sh   -> logs and JSON under $OUT
source bench/gpu_env.sh
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
{
  nproc; nvidia-smi -L; nvidia-smi topo -m
  echo "=== box check (2 GPUs)"
  timeout 90 $PY -m tui.cli check --output /tmp/rec; echo "check exit $? at $(( $(date +%s) - t0 )) s"
  echo "=== transports: ours vs perf_analyzer, 1x and 2x, c=256"
  timeout ${TRANSPORT_S:-170} $PY bench/transport_vs_perf_analyzer.py --variants 1x,2x --levels 256 --rounds 1 \
    --window-ms 1000 --max-windows 4
  echo "transport bench exit $? at $(( $(date +%s) - t0 )) s"
} > >(tee "$OUT/round2.log") 2>&1
VIT_BUDGET_S=${VIT_BUDGET_S:-190} ID_BUDGET_S=${ID_BUDGET_S:-40} bash bench/gpu_fidelity2.sh
echo "round2 total $(( $(date +%s) - t0 )) s"
