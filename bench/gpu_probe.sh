#!/usr/bin/env bash
# The scaling study (issue 8), training part, and the telemetry check (issue 4) on a 4-GPU box:
# the tool's training probe at 1, 2 and 4 GPUs (recorded), telemetry under a known load, and the
# probe's instrumentation cost against a bare DDP loop.
# Usage (device): bash bench/gpu_probe.sh   -> results under $OUT
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/probe.log") 2>&1
start=$(date +%s)
timeout 330 $PY -m tui.cli --record --probe-only --profile "${PROFILE:-4x_h200}" --output /tmp/probe \
  --set probe.models=mlp_258k,mlp_6.9m,transformer --set probe.strategies="${STRATEGIES:-ddp,fsdp}" \
  --set probe.world_sizes=1,2,4 --set probe.batch_sizes=32,128 --set probe.scaling="${SCALING:-weak,strong}" \
  --set probe.steps=30 --set probe.warmup_steps=10 --set probe.repeats=5 --set probe.precision=bf16 \
  --set probe.timeout_s=60 --set probe.allreduce=true --set probe.allreduce_max_bytes=1073741824
echo "probe exit $? in $(( $(date +%s) - start )) s"
cp /tmp/probe/*.sqlite "$OUT/"
timeout 120 $PY tests/telemetry/gpu_run.py --out "$OUT/telemetry" --idle-seconds 5 --load-seconds 20 --interval 0.5
echo "telemetry check exit $?"
if [ -z "${SKIP_OVERHEAD:-}" ]; then
  timeout 150 $PY bench/probe_overhead.py --device cuda --world-size 4 --model mlp_6.9m --batch 128 --steps 50 \
    --repeats 5 --trials 3
  echo "overhead bench exit $?"
fi
ps aux | grep -E 'engine.probe|torch' | grep -v grep || echo "no probe process left"
