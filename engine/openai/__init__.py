"""OpenAI's API (/v1/models, /v1/chat/completions, /v1/completions): the second server API behind
the load engine's seam, beside engine/triton/. Nothing here imports engine/triton/ or engine/load/."""
