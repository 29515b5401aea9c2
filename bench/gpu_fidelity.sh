#!/usr/bin/env bash
# Issue 13 on a lent GPU box: the box check, then our engine against perf_analyzer on the embedded
# ViT-B/32 (602 KB per request), alternating rounds, and the server threads' spread with the old
# (burst) and the new (one at a time, primed) way of opening a level's connections.
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/fidelity.log") 2>&1
nproc; nvidia-smi -L
if [ -z "${SKIP_CHECK:-}" ]; then
  echo "=== box check"; OUT=$OUT/check timeout 150 bash bench/gpu_check.sh > /dev/null 2>&1; echo "check exit $?"
  cat "$OUT/check/gpu_check.log" | head -60; tar -C "$OUT" -czf "$OUT/check.tgz" check && rm -rf "$OUT/check"
fi
echo "=== threads: burst vs spread at 128"
timeout 150 $PY bench/diag_fidelity.py --variant "${VARIANT:-1x}" --cases "ours:128:burst,ours:128,pa:128" --window-ms 2000 --max-windows 4
echo "=== ours vs perf_analyzer"
timeout ${BENCH_S:-330} $PY bench/load_vs_perf_analyzer.py --models openclip_vit_b32 --variant "${VARIANT:-1x}" \
  --levels "${LEVELS:-64,128,256}" --rounds "${ROUNDS:-3}" --window-ms 2000 --max-windows 5 --pa-retries 0
echo "bench exit $?"
cp bench/out/load_vs_perf_analyzer-*.json "$OUT/" 2>/dev/null
ps aux | grep -E 'tritonserver|backend_stub|perf_analyzer' | grep -v grep | grep -v defunct | head -3 || true
