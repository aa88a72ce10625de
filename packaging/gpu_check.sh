#!/usr/bin/env bash
# `make gpu-check`: on the lent GPU machine, which has no network, from the folder that
# `make gpu-prepare` made (.gpu/): a CUDA build of llama-cpp-python for that GPU with the
# machine's own toolchain, the engine bench at 1, 8, 32 and 64 chats with every layer on the
# GPU, NVML sampled meanwhile; one JSON summary on stdout (app/bench/gpu_check.py; --out DIR
# also keeps it and every log there). Whole check time-boxed to 9.5 minutes, build included.
# Runs with the machine's python3 (its numpy, Jinja2, psutil, NVML), or $PYTHON.
# Without an NVIDIA GPU: exit 2 with a one-line reason (`--backend cpu` is the dry run
# without one: docs/packaging.md).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ " $* " != *" --backend cpu "* ]] && ! command -v nvidia-smi >/dev/null; then
    echo "gpu-check: no nvidia-smi on PATH: this check needs an NVIDIA GPU and its driver" >&2
    exit 2
fi
PYTHON=${PYTHON:-python3}
# A hard stop past the check's own budget (--total-s, 570 s), in case a step ignores its
# timeout; GPU_CHECK_HARD_S moves it for a longer --total-s (the dry run's CPU build).
exec timeout --kill-after=10 "${GPU_CHECK_HARD_S:-600}" env PYTHONUNBUFFERED=1 PYTHONPATH=. "$PYTHON" -m app.bench.gpu_check "$@"
