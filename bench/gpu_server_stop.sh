#!/usr/bin/env bash
# EmbeddedServer.stop() on a GPU box: after each stop, NVML must list none of the server's
# processes (the 4x study's check found the 2x server's Python-backend stub still on GPU 1).
# Variants 1x,2x,4x (set VARIANTS for a smaller box), 2 rounds each: about 2.5 minutes on 4 GPUs.
# Usage (device, carry .carry): bash bench/gpu_server_stop.sh
source bench/gpu_env.sh
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/server_stop.log") 2>&1
nvidia-smi -L
t0=$(date +%s)
timeout 300 $PY bench/gpu_server_stop.py --variants "${VARIANTS:-1x,2x,4x}" --rounds "${ROUNDS:-2}"
code=$?
echo "server stop check exit $code in $(( $(date +%s) - t0 )) s"
ps aux | grep -E 'tritonserver|backend_stub' | grep -v grep | grep -v defunct || echo "no server left"
exit $code
