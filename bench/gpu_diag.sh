#!/usr/bin/env bash
# Issue 13 diagnosis on a lent GPU box: bench/diag_fidelity.py with the cases in $CASES.
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/diag.log") 2>&1
python3 -m pip install -q --no-index --no-deps --target /tmp/site2 .whl/*.whl 2>&1 | tail -1
export PATH=/tmp/site2/bin:$PATH PYTHONPATH="$PYTHONPATH:/tmp/site2"
nproc; python3 --version; nvidia-smi -L
timeout ${DIAG_S:-420} $PY bench/diag_fidelity.py --variant "${VARIANT:-2x}" --cases "$CASES" --pyspy "${PYSPY:-}" \
  --window-ms "${WINDOW_MS:-2000}" --max-windows "${MAX_WINDOWS:-5}"
echo "diag exit $?"
ps aux | grep -E 'tritonserver|backend_stub|perf_analyzer' | grep -v grep | grep -v defunct | head -3 || true
