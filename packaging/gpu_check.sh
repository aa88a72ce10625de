#!/usr/bin/env bash
# `make gpu-check`: CUDA build of llama-cpp-python in .venv-cuda, `chorus bench` at 1, 8,
# 32 and 64 chats with every layer on the GPU, NVML sampled meanwhile; one JSON summary on
# stdout (app/bench/gpu_check.py). Whole check time-boxed to 10 minutes, build included.
# Without an NVIDIA GPU: exit 2 with a one-line reason.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null; then
    echo "gpu-check: no nvidia-smi on PATH: this check needs an NVIDIA GPU and its driver" >&2
    exit 2
fi
[ -x .venv/bin/python ] || bash packaging/bootstrap.sh --terminal >&2  # not in the 10 minutes
PYTHON=${PYTHON:-.venv/bin/python}
# A hard stop past the script's own budget, in case a step ignores its timeout.
exec timeout --kill-after=10 630 env PYTHONPATH=. "$PYTHON" -m app.bench.gpu_check "$@"
