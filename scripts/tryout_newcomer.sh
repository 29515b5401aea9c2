#!/usr/bin/env bash
# A newcomer's walk through the README, beside two CPU hogs (issue 54's "tried again"): the
# streaming example with and without a prompt file, a sweep, a study, check, compare of an HTTP
# and a gRPC run, and Ctrl-C in the TUI (tmux). Every command's output and exit code, and the
# TUI's screens, go under OUT (default /tmp/tryout); nothing is judged here: read them.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/tryout}
rm -rf "$OUT" && mkdir -p "$OUT/rec"
G=(.venv/bin/gpuscale-tui)
HOGS=${HOGS:-2}
hog_pids=()
for _ in $(seq "$HOGS"); do (while :; do :; done) & hog_pids+=($!); done
trap 'kill "${hog_pids[@]}" 2>/dev/null; tmux kill-session -t tryout 2>/dev/null' EXIT

step() {  # step NAME CMD...: run, keep stdout+stderr, the exit code and the seconds it took
  local name=$1; shift
  local t0=$SECONDS
  timeout -k 10 900 "$@" >"$OUT/$name.txt" 2>&1
  local rc=$?
  echo "$name: exit $rc after $((SECONDS - t0)) s (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$OUT/steps.txt"
}

printf '%s\n' '"Tell me a story about a lighthouse."' '{"text": "Why is the sky blue?", "MAX_TOKENS": [32]}' >"$OUT/prompts.jsonl"
step stream_prompts "${G[@]}" --record --output "$OUT/rec" --set model.name=toy_llm --set load.transport=grpc_stream \
    --set load.concurrency=1,8,32 --input-data "$OUT/prompts.jsonl" \
    --slo ttft_p99=50ms,itl_p99=20ms --set hardware.cost_per_hour=2.5
step stream_no_prompts "${G[@]}" --record --output "$OUT/rec" --set model.name=toy_llm --set load.transport=grpc_stream \
    --set load.concurrency=1,8 --set hardware.cost_per_hour=2.5
newest() { ls -t "$OUT"/rec/*.sqlite | head -1; }
step sweep_http "${G[@]}" --record --output "$OUT/rec" --set model.name=identity --set load.concurrency=1,4,16
http_run=$(newest)
step sweep_grpc "${G[@]}" --record --output "$OUT/rec" --set model.name=identity --set load.transport=grpc \
    --set load.concurrency=1,4,16
grpc_run=$(newest)
step compare "${G[@]}" compare "$http_run" "$grpc_run"
step study "${G[@]}" study --record --output "$OUT/rec" --variants 'cpu2,cpu*2' --set model.name=toy_llm \
    --set load.transport=grpc_stream --set load.input_tokens=16 --set load.output_tokens=8 \
    --set load.concurrency=2,8 --set hardware.cost_per_hour=2
step check "${G[@]}" check

# Ctrl-C in the TUI: the stop dialog, then a second Ctrl-C stops at once (exit 130)
tmux kill-session -t tryout 2>/dev/null
tmux new-session -d -s tryout -x 80 -y 24 \
    "${G[*]} --output $OUT/rec --set model.name=identity --set load.concurrency=1,2,4,8; echo EXIT=\$? >$OUT/tui_exit.txt; sleep 30"
for _ in $(seq 120); do  # until the sweep is running (the TUI says so), at most 2 minutes
  tmux capture-pane -p -t tryout >"$OUT/tui_running.txt" 2>/dev/null
  grep -q "infer/s" "$OUT/tui_running.txt" && break  # the sweep table's header: a level is measured
  sleep 1
done
tmux send-keys -t tryout C-c && sleep 2 && tmux capture-pane -p -t tryout >"$OUT/tui_after_ctrl_c.txt"
tmux send-keys -t tryout C-c
for _ in $(seq 60); do [ -s "$OUT/tui_exit.txt" ] && break; sleep 1; done
tmux capture-pane -p -t tryout >"$OUT/tui_after_second_ctrl_c.txt"
echo "tui: $(cat "$OUT/tui_exit.txt" 2>/dev/null || echo 'no exit within 60 s')" | tee -a "$OUT/steps.txt"
