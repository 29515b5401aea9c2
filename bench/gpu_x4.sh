#!/usr/bin/env bash
# The 4x H200 runs, in stages that each fit one device call (10 min):
#   STAGE=check_study   the box check (issue 19; CHECK=0 skips it), then the scaling study 1x -> 2x -> 4x
#                       over one transport (issue 15; TRANSPORT=http, BATCH=1, LEVELS=16..512, SLO_MS=50,
#                       MPS=auto by default)                                                      about 6 minutes
#   STAGE=transports    our transports against perf_analyzer's, 1x/2x/4x, 3 rounds (issue 14)   about 6 minutes
#                       (TRANSPORTS=..., BATCH=images per request, LEVELS=...)
#   STAGE=fidelity      ours against perf_analyzer on the 4x variant, levels 16..512 and rate mode
#                       at 25/50/75 % of the peak, 3 alternating rounds (issue 13)               about 5 minutes
#   STAGE=cuda_copies   cuda_shm, one copy of the inputs (perf_analyzer's layout) against a copy on
#                       each GPU (GPUSCALE_LOAD_DIAG=cuda_each), 1x and 4x, per-GPU batch timings,
#                       3 rounds per arm (issue 14; BATCH=32 LEVELS=48,96 by default)            about 8 minutes
#   STAGE=mps           the embedded server with and without MPS (server.mps = off / on), 1x and Nx,
#                       ours and perf_analyzer alternating, per-GPU batch timings; PAIRS= lists
#                       transport:images per request:level:rounds (issue 14)                     about 5 minutes
# Usage (device, carry .carry and .wheels/perf_analyzer): STAGE=... bash bench/gpu_x4.sh
# On a 2-GPU box: GPUS=2 (profile 2x_h200, variants 1x,2x; fidelity on the 2x variant).
source bench/gpu_env.sh
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
STAGE=${STAGE:-check_study}
GPUS=${GPUS:-4}
PROFILE=${PROFILE:-${GPUS}x_h200}
VARIANTS=${VARIANTS:-$( [ "$GPUS" = 2 ] && echo 1x,2x || echo 1x,2x,4x )}
exec > >(tee "$OUT/$STAGE.log") 2>&1
nvidia-smi -L
t0=$(date +%s)
case "$STAGE" in
  check_study)
    if [ "${CHECK:-1}" = 1 ]; then
      PROFILE=$PROFILE timeout 120 bash bench/gpu_check.sh > /dev/null 2>&1
      cat "$OUT/gpu_check.log"
      (cd "$OUT" && tar -czf check.tgz check*.out check*.err nvidia_smi_* && rm -f check*.out check*.err nvidia_smi_*)
    fi
    TRANSPORT=${TRANSPORT:-http}
    REC=/tmp/study; rm -rf "$REC"; mkdir -p "$REC"
    timeout $(( 560 - ($(date +%s) - t0) )) $PY -m tui.cli study --record --profile "$PROFILE" --variants "$VARIANTS" \
      --slo p99=${SLO_MS:-50}ms --search-steps 3 --set load.concurrency=${LEVELS:-16,64,128,256,512} --set load.window_ms=1000 \
      --set load.warmup_s=1 --set load.max_windows=4 --set telemetry.nvml_interval_s=0.5 \
      --set load.transport="$TRANSPORT" --set load.batch_size=${BATCH:-1} --set server.mps=${MPS:-auto} --output "$REC"
    echo "study exit $? in $(( $(date +%s) - t0 )) s (whole stage)"
    idx=$(ls "$REC"/*.study.json 2>/dev/null | head -1)
    [ -n "$idx" ] && $PY -m tui.cli compare "$idx" --format md > "$REC/study_compare.md" 2>&1
    tar -C "$REC" -czf "$OUT/study_$TRANSPORT.tgz" . ;;
  transports)
    timeout 560 $PY bench/transport_vs_perf_analyzer.py --variants "$VARIANTS" --levels ${LEVELS:-256} \
      --transports ${TRANSPORTS:-http,system_shm,cuda_shm} --batch ${BATCH:-1} --rounds ${ROUNDS:-3} --window-ms ${WINDOW_MS:-800} --max-windows ${MAX_WINDOWS:-4} ;;
  fidelity)
    timeout -k 5 560 $PY bench/load_vs_perf_analyzer.py --models openclip_vit_b32 --variant ${GPUS}x \
      --levels 16,64,128,256,512 --rates-of-peak 0.25,0.5,0.75 --peak-from max --rounds 3 --window-ms 1000 \
      --max-windows 6 --pa-retries 0 --budget-s 540 --run-overhead-s 1.5 --server-start-s 10 ;;
  cuda_copies)
    for arm in one each; do
      D=""; [ $arm = each ] && D=cuda_each
      left=$(( 560 - ($(date +%s) - t0) )); [ $arm = one ] && left=$(( left / 2 ))  # half for the first arm
      GPUSCALE_LOAD_DIAG=$D timeout -k 5 $left \
        $PY bench/transport_vs_perf_analyzer.py --variants ${VARIANTS_CUDA:-1x,${GPUS}x} --transports cuda_shm \
        --batch ${BATCH:-32} --levels ${LEVELS:-48,96} --rounds ${ROUNDS:-3} --window-ms 800 --max-windows 4 \
        --instance-timing "/tmp/timing_$arm" > "$OUT/cuda_$arm.log" 2>&1
      echo "arm $arm exit $?"; tail -25 "$OUT/cuda_$arm.log"
    done ;;
  mps)
    # pairs transport:images per request:level:rounds; each pair runs the server without MPS and
    # with it (server.mps = off / on, the tool's own daemon), the order flipping from pair to pair
    n=0
    for pair in ${PAIRS:-cuda_shm:32:48:3 cuda_shm:1:128:2}; do
      IFS=: read -r tr b lv rounds <<< "$pair"
      arms="off on"; [ $((n % 2)) = 1 ] && arms="on off"; n=$((n + 1))
      for arm in $arms; do
        left=$(( ${STAGE_S:-560} - ($(date +%s) - t0) ))
        [ $left -lt 90 ] && { echo "pair $pair arm $arm skipped: $left s left"; continue; }
        timeout -k 5 $left $PY bench/transport_vs_perf_analyzer.py --variants "$VARIANTS" --mps $arm \
          --transports $tr --batch $b --levels $lv --rounds $rounds --window-ms 800 --max-windows 4 \
          --instance-timing "/tmp/timing_${arm}_$tr$b" > "$OUT/mps_${arm}_$tr$b.log" 2>&1
        echo "pair $pair mps $arm exit $?"; grep -E "^==|^  [0-9]x c=|^  (ours|perf_)" "$OUT/mps_${arm}_$tr$b.log"
      done
    done ;;
esac
echo "stage $STAGE done in $(( $(date +%s) - t0 )) s"
ps aux | grep -E 'tritonserver|backend_stub|engine\.load' | grep -v grep | grep -v defunct || echo "no server or worker left"
