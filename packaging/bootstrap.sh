#!/usr/bin/env bash
# Sets up a development install from scratch, idempotently: a virtual environment in
# .venv, Chorus with its test extras (llama-cpp-python builds from source the first time,
# about 5 minutes on 2 cores; pip's wheel cache keeps it), and the default model.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --disable-pip-version-check -q -e '.[test]'
.venv/bin/chorus models fetch
