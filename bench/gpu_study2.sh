#!/usr/bin/env bash
# The scaling study of issue 15 on a 2x H200 box, in one command: the embedded Triton serves
# openclip_vit_b32 (Python backend) at variants 1x then 2x; on each the same concurrency sweep, then
# the latency-target search for p99 <= 50 ms; energy per image from NVML's total-energy counter.
# Headless (no textual on the box). Everything under $OUT: the study log, the two recordings, the
# study index, its Markdown and HTML reports, and the servers' logs. Budget: under 8 minutes
# (two server starts, 2 x (6 levels + at most 3 search levels) of 2 s windows).
# Usage (device): bash bench/gpu_study2.sh   (env: PROFILE, LEVELS, SLO, SEARCH_STEPS, WINDOW_MS, MAX_WINDOWS,
#   TRANSPORT=http|system_shm|cuda_shm once load.transport exists)
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
REC=/tmp/study2; rm -rf "$REC"; mkdir -p "$REC"
PROFILE=${PROFILE:-2x_h200}
LEVELS=${LEVELS:-1,8,32,64,128,256}
SLO=${SLO:-p99=50ms}
exec > >(tee "$OUT/study2.log") 2>&1
nvidia-smi -L
start=$(date +%s)
timeout 450 $PY -m tui.cli study --record --profile "$PROFILE" --variants 1x,2x --slo "$SLO" \
  --search-steps "${SEARCH_STEPS:-3}" --set load.concurrency="$LEVELS" --set load.window_ms="${WINDOW_MS:-2000}" \
  --set load.warmup_s=2 --set load.max_windows="${MAX_WINDOWS:-5}" --set telemetry.nvml_interval_s=0.5 \
  ${TRANSPORT:+--set load.transport=$TRANSPORT} --output "$REC"
code=$?
echo "study exit $code in $(( $(date +%s) - start )) s"
$PY -c "import textual" 2>/dev/null && echo "textual present on this box" || echo "textual absent on this box (the study ran headless without it)"
cp "$REC"/*.sqlite "$REC"/*.study.json "$REC"/*.md "$REC"/*.html "$OUT/" 2>/dev/null
tar -C "$REC" -czf "$OUT/server_logs.tgz" $(cd "$REC" && ls -d *.logs 2>/dev/null)
# the index replays and exports as one study
idx=$(ls "$REC"/*.study.json | head -1)
[ -n "$idx" ] && $PY -m tui.cli compare "$idx" --format md > "$OUT/study2_compare.md" 2>&1
sleep 1; ps aux | grep -E 'tritonserver|backend_stub' | grep -v grep | grep -v defunct || echo "no server left"
exit $code
