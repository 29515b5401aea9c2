#!/usr/bin/env bash
# The serving study's --serve template on the LLM boxes (bench/device/llm_gpu_box.sh study):
#   bash bench/device/llama_serve.sh {port} {tp} {gpus}
# One llama-server over the config's GPUs (the study sets CUDA_VISIBLE_DEVICES={gpus}): all layers
# on the GPUs, split over them with --split-mode $SPLIT (tensor by default, llama.cpp's tensor
# parallel; its row split would not load on 2x H200: "device CUDA0 does not support split buffers") when {tp} > 1, whole on its one GPU otherwise.
# No GPUs ({gpus} empty): {tp} is the server's CPU threads. exec: the study's guard ends it.
# Environment: LLAMA_SERVER, LLM_MODEL (required), SPLIT, PAR (slots), CTX (whole context), LLM_EXTRA.
set -eu
port=$1 tp=$2 gpus=${3:-}
if [ -z "$gpus" ]; then dev=(-t "$tp" -tb "$tp")
elif [ "$tp" -gt 1 ]; then dev=(-ngl 999 --split-mode "${SPLIT:-tensor}")
else dev=(-ngl 999 --split-mode none)
fi
# shellcheck disable=SC2086
exec "$LLAMA_SERVER" -m "$LLM_MODEL" --alias gpuscale-llm --host 127.0.0.1 --port "$port" \
  --parallel "${PAR:-8}" --ctx-size "${CTX:-16384}" --metrics "${dev[@]}" ${LLM_EXTRA:-}
