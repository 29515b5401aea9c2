#!/usr/bin/env bash
# The scaling study (issue 8), Triton part: on a 4-GPU box the tool itself (headless --record)
# starts the embedded Triton with the ViT-B/32 Python-backend model at config variants 1x, 2x and
# 4x in turn and runs the full concurrency sweep on each; then, as an independent check, the plain
# aiohttp client (bench/plain_client.py) measures each variant at one level on a fresh server.
# Usage (device): bash bench/gpu_study.sh [variants...]   -> recordings and logs under $OUT
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
REC=/tmp/study; mkdir -p "$REC"
VARIANTS=${*:-1x 2x 4x}
PROFILE=${PROFILE:-4x_h200}
CHECK_LEVELS=${CHECK_LEVELS:-64 128}
LEVELS=${LEVELS:-1,4,8,16,32,64,128,256}
exec > >(tee "$OUT/study.log") 2>&1
nvidia-smi -L; nvidia-smi topo -m
for v in $VARIANTS; do
  echo "=== variant $v: the tool's sweep"
  start=$(date +%s)
  timeout 280 $PY -m tui.cli --record --profile "$PROFILE" --set model.variant="$v" \
    --set load.concurrency="$LEVELS" --set load.window_ms="${WINDOW_MS:-2000}" --set load.warmup_s=2 --set load.max_windows="${MAX_WINDOWS:-6}" \
    --output "$REC"
  echo "variant $v: exit $? in $(( $(date +%s) - start )) s"
  echo "=== variant $v: independent plain client at concurrency $CHECK_LEVELS"
  $PY -m tui.cli server --model openclip_vit_b32 --variant "$v" > /tmp/server_$v.out 2>&1 &
  server=$!
  for i in $(seq 1 90); do grep -q '^HTTP' /tmp/server_$v.out && break; sleep 1; done
  url=$(awk '/^HTTP/ {print $2}' /tmp/server_$v.out)
  for c in $CHECK_LEVELS; do
    timeout 60 $PY bench/plain_client.py --url "$url" --model openclip_vit_b32 --concurrency "$c" \
      --processes 16 --seconds 8 --warmup 2 | sed "s/^{/{\"variant\": \"$v\", /" | tee -a "$OUT/plain_client.jsonl"
  done
  kill -INT $server; wait $server
done
cp "$REC"/*.sqlite "$OUT/"
tar -C "$REC" -czf "$OUT/server_logs.tgz" $(cd "$REC" && ls -d *.logs)
if [ -n "${TELEMETRY_CHECK:-}" ]; then
  timeout 120 $PY tests/telemetry/gpu_run.py --out /tmp/telemetry --idle-seconds 3 --load-seconds 15 --interval 0.5
  echo "telemetry check exit $?"
  tar -C /tmp -czf "$OUT/telemetry.tgz" telemetry
fi
sleep 1; ps aux | grep -E 'tritonserver|backend_stub' | grep -v grep | grep -v defunct || echo "no server left"
