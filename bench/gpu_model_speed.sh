#!/usr/bin/env bash
# Issue 14: how fast the embedded ViT-B/32 serves (in-process forward, then the real embedded
# Triton measured by perf_analyzer 2.41 with --shared-memory none|system|cuda, the wire model,
# instance counts per GPU), GPU busy % from NVML. Steps and their order: bench/gpu_model_speed.py.
# Needs (git-ignored, carried): .carry/triton.tar.xz (bench/make_carry.sh) and
# .wheels/perf_analyzer/ (python bench/load_pa_setup.py).
# Usage (device, 2x H200): bash bench/gpu_model_speed.sh   -> $OUT/{results.jsonl,table.txt,logs/}
#   BUDGET_S=290 (default; ~5 min: forward, 1x, wire, 2x, then what fits) or BUDGET_S=560 for all
#   steps (instance counts 1 and 3, torch.compile); extra arguments go to `all` (e.g. --levels 64,128,256).
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
BUDGET_S=${BUDGET_S:-290}
exec > >(tee "$OUT/gpu_model_speed.log") 2>&1
echo "== $(date -u +%FT%TZ)  $(nvidia-smi -L 2>&1 | tr '\n' ';')"
nvidia-smi topo -m 2>&1 | head -8
for need in .carry/triton.tar.xz .wheels/perf_analyzer/perf_analyzer; do
  [ -e "$need" ] || echo "WARNING: $need missing (carry it): the Triton steps will fail"
done
GMS_TABLE_BY_CALLER=1 timeout $((BUDGET_S + 90)) $PY bench/gpu_model_speed.py all --out "$OUT" --budget-s "$BUDGET_S" "$@"
echo "exit $?"
sleep 1
ps -eo pid,args | grep -E 'tritonserver|triton_python_backend_stub|perf_analyzer' | grep -v grep || echo "no server or perf_analyzer left"
[ -f "$OUT/table.txt" ] && cat "$OUT/table.txt"
