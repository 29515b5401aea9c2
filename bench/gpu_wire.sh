#!/usr/bin/env bash
# The wire's ceiling on a lent GPU box (issue 14 item 3): the embedded ViT-B/32 on one GPU, a short
# sweep, then `--wire` (the same levels against the no-compute `wire` model with 602 KB per image,
# same transport and batch), per transport; the Markdown reports carry the wire table and the
# verdict line ("the HTTP path caps at N images/s with 602 KB bodies; the model's K instances would
# do M images/s (from Triton's compute times)").
# Usage (device): bash bench/gpu_wire.sh            (results under $OUT; about 3-4 minutes)
#        TRANSPORTS="http system_shm cuda_shm" VARIANT=4x LEVELS=16,64,128,256 bash bench/gpu_wire.sh
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/wire.log") 2>&1
VARIANT=${VARIANT:-1x}
LEVELS=${LEVELS:-16,32,64,128}
for transport in ${TRANSPORTS:-http cuda_shm}; do
  rec="/tmp/rec-wire-$transport"; rm -rf "$rec"
  start=$(date +%s)
  timeout 300 $PY -m tui.cli --record --no-check --wire --profile local --output "$rec" \
    --set model.name=openclip_vit_b32 --set model.variant="$VARIANT" --set load.transport="$transport" \
    --set load.concurrency="$LEVELS" --set load.window_ms=1000 --set load.warmup_s=1 --set load.max_windows=5 \
    | grep -v '  window '
  echo "== $transport: exit ${PIPESTATUS[0]} in $(( $(date +%s) - start )) s"
  for f in "$rec"/*.sqlite; do
    $PY -m tui.cli export -f md "$f" >/dev/null && cp "$f" "${f%.sqlite}.md" "$OUT/"
    sed -n "/^## The wire's ceiling/,/^## Recommendation/p" "${f%.sqlite}.md"
  done
done
ps aux | grep -E 'tritonserver|backend_stub' | grep -v grep || echo "no server left"
