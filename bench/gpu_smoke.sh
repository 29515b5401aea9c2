#!/usr/bin/env bash
# A first look at a lent GPU machine (any GPU count): does the embedded Triton serve the ViT on a
# GPU, do NVML and Triton's GPU gauges read, does a short sweep and a tiny probe run?
# Usage (device): bash bench/gpu_smoke.sh   (results under $OUT)
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/smoke.log") 2>&1
set -x
nvidia-smi -L; nvidia-smi topo -m
$PY -c 'import sys, sysconfig, torch, numpy; print(sys.version, sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY"), torch.__version__, numpy.__version__, torch.cuda.device_count())'
ls "$($PY -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')" | grep -i libpython || true
NGPU=$(nvidia-smi -L | wc -l)
VARIANT=$([ "$NGPU" -ge 2 ] && echo 2x || echo 1x)
# 1. the embedded server on GPU: start, one plain-client burst, Triton's GPU gauges
$PY -m tui.cli server --model openclip_vit_b32 --variant "$VARIANT" > /tmp/server.out 2>&1 &
SERVER=$!
for i in $(seq 1 120); do grep -q '^HTTP' /tmp/server.out && break; sleep 1; done
cat /tmp/server.out
URL=$(awk '/^HTTP/ {print $2}' /tmp/server.out); METRICS=$(awk '/^metrics/ {print $2}' /tmp/server.out)
timeout 60 $PY bench/plain_client.py --url "$URL" --model openclip_vit_b32 --concurrency 32 --seconds 5 --warmup 2
sleep 2; curl -s "$METRICS" | grep -E '^nv_gpu_(utilization|memory_used_bytes|power_usage)' | tee "$OUT/metrics_gpu.txt"
kill -INT $SERVER; wait $SERVER
# 2. a short headless sweep through the tool (records under /tmp/rec)
timeout 240 $PY -m tui.cli --record --profile local --set model.name=openclip_vit_b32 --set model.variant="$VARIANT" \
  --set load.concurrency=1,32 --set load.window_ms=1000 --set load.warmup_s=1 --set load.max_windows=4 --output /tmp/rec
echo "sweep exit $?"
cp /tmp/rec/*.sqlite "$OUT/" 2>/dev/null
# 3. telemetry and a tiny probe
timeout 30 $PY -m engine.telemetry --seconds 3 > "$OUT/telemetry.jsonl"; echo "telemetry exit $?"; head -c 1500 "$OUT/telemetry.jsonl"
timeout 120 $PY -m engine.probe --models mlp_258k --world-sizes 1 --batch-sizes 64 --steps 10 --warmup-steps 2 --repeats 2 --device cuda
echo "probe exit $?"
ps aux | grep -E 'tritonserver|backend_stub' | grep -v grep || echo "no server left"
