#!/usr/bin/env bash
# Issue 52 on a box of exactly 2 GPUs: `check`, the training probe and the scale study with its
# perf_analyzer rounds, each step bounded, its output under $OUT as it comes.
#   bash bench/device/two_gpu_box.sh studies    # check, probe, both studies (http, cuda_shm)
#   bash bench/device/two_gpu_box.sh rounds     # rounds at fixed levels against the studies' jsonl
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-.bench-out}; mkdir -p "$OUT"
P='import sys; sys.modules["textual"] = None; from bench.common import device_environment; device_environment(); from tui.cli import main; sys.exit(main(sys.argv[1:]))'
{ nvidia-smi -L; nproc; free -g | head -2; nvidia-smi topo -m; } > "$OUT/machine.txt" 2>&1
# check and the probe start no Triton: the box's own numpy 2 (its scipy needs it), no numpy<2 re-exec
case "${1:-studies}" in
studies)
  GPUSCALE_NUMPY1_VENV=1 timeout -k 5 90 python3 -c "$P" check --profile 2x_h200 > "$OUT/check.txt" 2>&1; echo "check exit $?" >> "$OUT/check.txt"
  timeout -k 10 400 python3 -m bench scale_study --gpus 2 --transports http,cuda_shm --rounds 0 \
    --levels 64,128,512 --search-steps 1 --max-windows 5 --study-timeout-s 200 > "$OUT/studies.txt" 2>&1
  echo "studies exit $?" >> "$OUT/studies.txt"
  GPUSCALE_NUMPY1_VENV=1 timeout -k 5 120 python3 -c "$P" --profile 2x_h200 --probe-only --headless > "$OUT/probe.txt" 2>&1; echo "probe exit $?" >> "$OUT/probe.txt" ;;
box)
  GPUSCALE_NUMPY1_VENV=1 timeout -k 5 90 python3 -c "$P" check --profile 2x_h200 > "$OUT/check.txt" 2>&1; echo "check exit $?" >> "$OUT/check.txt"
  GPUSCALE_NUMPY1_VENV=1 timeout -k 5 120 python3 -c "$P" --profile 2x_h200 --probe-only --headless > "$OUT/probe.txt" 2>&1; echo "probe exit $?" >> "$OUT/probe.txt" ;;
rounds)
  timeout -k 10 560 python3 -m bench scale_study --gpus 2 --skip-study --studies-from "${2:-studies.jsonl}" \
    --transports cuda_shm,http --round-levels "${3:-peak}" --rounds 3 --max-windows 5 --budget-s 500 > "$OUT/rounds.txt" 2>&1
  echo "rounds exit $?" >> "$OUT/rounds.txt" ;;
fixed)  # rounds at fixed levels for some configs: fixed CONFIGS TRANSPORTS LEVELS [PA_EXTRA]
  timeout -k 10 560 python3 -m bench scale_study --gpus 2 --skip-study --configs "$2" --transports "$3" \
    --round-levels "$4" --pa-extra "${5:-}" --rounds 3 --max-windows 5 --budget-s "${BUDGET:-500}" >> "$OUT/fixed.txt" 2>&1
  echo "fixed exit $?" >> "$OUT/fixed.txt" ;;
esac
