#!/usr/bin/env bash
# The box check (issue 19) on a lent GPU box (1 GPU or several): `gpuscale-tui check` in text and
# --json, a --quick run (NVML only), a check against the bundled profile that matches the box, and
# nvidia-smi's own view of the same things to compare the verdicts with. Optionally (SESSION=1,
# needs .carry/triton.tar.xz) a short session, to show the check recorded and in the report.
# Usage (device): bash bench/gpu_check.sh            results under $OUT; about 1-2 minutes
#                 PROFILE=2x_h200 bash bench/gpu_check.sh   (default: picked from the GPU count and name)
if [ -f .carry/triton.tar.xz ]; then
  source bench/gpu_env.sh
else  # the check needs no Triton: the same environment without the carry
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  PY=${PY:-python3}
fi
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
if [ -z "${PROFILE:-}" ]; then
  case "$NAME" in *H200*) PROFILE="${NGPU}x_h200" ;; *H100*) PROFILE="${NGPU}x_h100_nvlink" ;; *) PROFILE="" ;; esac
  [ -n "$PROFILE" ] && [ ! -f "profiles/$PROFILE.toml" ] && PROFILE="1x_h200"  # no such bundled profile: a mismatch to show
fi
echo "box: $NGPU x $NAME; profile to compare: ${PROFILE:-none}"
run() {  # name, then the command: keeps stdout, stderr, exit status and wall time apart
  local name=$1; shift
  local t0=$(date +%s%N)
  timeout 300 "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  local rc=$?
  echo "== $name: exit $rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms: $*"
  cat "$OUT/$name.out"; tail -5 "$OUT/$name.err"
}
run check        $PY -m tui.cli check --output /tmp/rec
run check_json   $PY -m tui.cli check --json --output /tmp/rec
run check_quick  $PY -m tui.cli check --quick --output /tmp/rec
[ -n "$PROFILE" ] && run check_profile $PY -m tui.cli check --profile "$PROFILE" --output /tmp/rec
# what nvidia-smi says, for the same facts (links under no load, power limits, throttle reasons)
nvidia-smi topo -m > "$OUT/nvidia_smi_topo.txt" 2>&1
nvidia-smi -q -d PCIE,POWER,PERFORMANCE,TEMPERATURE,ECC,PAGE_RETIREMENT,ROW_REMAPPER > "$OUT/nvidia_smi_q.txt" 2>&1
nvidia-smi --query-gpu=index,name,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,power.limit,power.default_limit,temperature.gpu --format=csv > "$OUT/nvidia_smi_query.csv" 2>&1
cat "$OUT/nvidia_smi_topo.txt" "$OUT/nvidia_smi_query.csv"
if [ "${SESSION:-0}" = 1 ] && [ -f .carry/triton.tar.xz ]; then
  # a short sweep: the session runs the check first (its all-reduce only with the probe)
  run session $PY -m tui.cli --record --profile local --set model.name=identity --set load.concurrency=1 \
    --set load.window_ms=500 --set load.warmup_s=0.5 --set load.max_windows=3 --output /tmp/rec
  for f in /tmp/rec/*.sqlite; do $PY -m tui.cli export -f md "$f" --out "$OUT" && cp "$f" "$OUT/"; done
fi
ps aux | grep -E 'engine\.(check|probe)|tritonserver' | grep -v grep || echo "no check, probe or server process left"
