#!/usr/bin/env bash
# The client-side benchmarks on a quiet GPU machine (a shared 2-core box is too noisy for them):
# our load engine against perf_analyzer (issue 3) and the TUI against headless (issue 7).
# Needs .carry (tritonserver, textual wheels) and .wheels/perf_analyzer carried.
# Usage (device): bash bench/gpu_benches.sh   -> logs and JSON under $OUT
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/benches.log") 2>&1
$PY -m pip install --quiet --no-index --find-links .carry/wheels textual 2>&1 | tail -2
echo "=== load engine vs perf_analyzer"
timeout "${LOAD_S:-300}" $PY bench/load_vs_perf_analyzer.py --models "${MODELS:-identity,vit_tiny}" --levels 1,8,32 \
  --rounds "${ROUNDS:-2}" --window-ms "${WINDOW_MS:-1000}"
echo "load bench exit $?"
cp bench/out/load_vs_perf_analyzer-*.json "$OUT/" 2>/dev/null
echo "=== TUI vs headless"
timeout "${TUI_S:-240}" $PY bench/tui_overhead.py --model "${TUI_MODEL:-vit_tiny}" --variant "${TUI_VARIANT:-auto}" \
  --concurrency 1,8,32,128 --pairs "${PAIRS:-2}" --size 160x45
echo "tui bench exit $?"
ps aux | grep -E 'tritonserver|backend_stub|perf_analyzer' | grep -v grep | grep -v defunct || echo "nothing left"
