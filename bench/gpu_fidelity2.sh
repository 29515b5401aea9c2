#!/usr/bin/env bash
# Issue 13, the rest of "Done means" 2 and 4 on a lent 2x H200 box (32 cores), in under 6 minutes:
#  1. the embedded ViT-B/32 (602 KB FP32 per request): our engine against perf_analyzer 2.41 at
#     concurrency 16..512, then rate mode at 25/50/75 % of the peak found in the same run (ours
#     both corrected and uncorrected for coordinated omission, against --request-rate-range),
#     3 alternating rounds;
#  2. the identity model on CPU at c=8 and 32: client CPU per request of both tools.
# Everything lands in $OUT: fidelity2.log and the two JSON files of bench/load_vs_perf_analyzer.py.
# Needs the carried paths .carry (bench/make_carry.sh) and .wheels/perf_analyzer (bench/load_pa_setup.py).
#
# Time: each part runs under --budget-s (no run is started that would end past it, so the summary
# and the JSON always come) and under its own `timeout` a little longer; the two timeouts plus the
# setup stay under 6 minutes whatever the estimate says. Windows are 700 ms (not 1.5-2 s) because
# 48 tool runs of 3..5 windows must fit into the ViT budget; each window still holds thousands of
# requests at these rates.
# Env overrides: MODEL (openclip_vit_b32), VARIANT (2x), LEVELS (16,64,128,256,512), ROUNDS (3), RATES (0.25,0.5,0.75),
#   WINDOW_MS (700), MAX_WINDOWS (5), VIT_BUDGET_S (245), ID_LEVELS (8,32), ID_ROUNDS (2),
#   ID_WINDOW_MS (1000), ID_MAX_WINDOWS (4), ID_BUDGET_S (50).
source bench/gpu_env.sh
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/fidelity2.log") 2>&1
t0=$(date +%s)
MODEL=${MODEL:-openclip_vit_b32}; VARIANT=${VARIANT:-2x}; LEVELS=${LEVELS:-16,64,128,256,512}; ROUNDS=${ROUNDS:-3}; RATES=${RATES:-0.25,0.5,0.75}
WINDOW_MS=${WINDOW_MS:-700}; MAX_WINDOWS=${MAX_WINDOWS:-5}; VIT_BUDGET_S=${VIT_BUDGET_S:-245}
ID_LEVELS=${ID_LEVELS:-8,32}; ID_ROUNDS=${ID_ROUNDS:-2}; ID_WINDOW_MS=${ID_WINDOW_MS:-1000}; ID_MAX_WINDOWS=${ID_MAX_WINDOWS:-4}
ID_BUDGET_S=${ID_BUDGET_S:-50}
nproc; nvidia-smi -L
VIT=(--models "$MODEL" --variant "$VARIANT" --levels "$LEVELS" --rounds "$ROUNDS" --rates-of-peak "$RATES"
     --window-ms "$WINDOW_MS" --max-windows "$MAX_WINDOWS" --pa-retries 0 --budget-s "$VIT_BUDGET_S"
     --run-overhead-s 1.5 --server-start-s 30)
IDENT=(--models identity --variant cpu --levels "$ID_LEVELS" --rounds "$ID_ROUNDS" --window-ms "$ID_WINDOW_MS"
       --max-windows "$ID_MAX_WINDOWS" --pa-retries 0 --budget-s "$ID_BUDGET_S" --run-overhead-s 1.5 --server-start-s 5)
echo "=== estimate (setup took $(( $(date +%s) - t0 )) s)"
$PY bench/load_vs_perf_analyzer.py "${VIT[@]}" --estimate
$PY bench/load_vs_perf_analyzer.py "${IDENT[@]}" --estimate
echo "hard limit: $(( VIT_BUDGET_S + 20 )) s + $(( ID_BUDGET_S + 20 )) s (timeouts) after the setup; runs that would pass a budget are not started"

echo "=== $MODEL: concurrency $LEVELS, rate at $RATES of the peak"
timeout -k 5 $(( VIT_BUDGET_S + 20 )) $PY bench/load_vs_perf_analyzer.py "${VIT[@]}"
vit_code=$?; echo "$MODEL bench exit $vit_code at $(( $(date +%s) - t0 )) s"

echo "=== identity: client CPU per request at $ID_LEVELS"
timeout -k 5 $(( ID_BUDGET_S + 20 )) $PY bench/load_vs_perf_analyzer.py "${IDENT[@]}"
id_code=$?; echo "identity bench exit $id_code at $(( $(date +%s) - t0 )) s"

sleep 1; ps aux | grep -E 'tritonserver|backend_stub|perf_analyzer|engine.load.worker' | grep -v grep | grep -v defunct | head -3 || true
ls "$OUT"
echo "total $(( $(date +%s) - t0 )) s"
# 0 only when both finished every planned run (1: a budget left runs out, 124/130: cut off)
exit $(( vit_code != 0 ? vit_code : id_code ))
