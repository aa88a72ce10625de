#!/usr/bin/env bash
# Sets up a development install from scratch, idempotently: a virtual environment in
# .venv, Chorus with its test extras (llama-cpp-python builds from source the first time,
# about 5 minutes on 2 cores; pip's wheel cache keeps it), the default model, and the
# system libraries Qt needs to open a window on an X11 desktop.
#
#   bootstrap.sh           for the desktop app: missing Qt libraries are installed (as root)
#                          or the exact apt-get line is printed and the set-up stops
#   bootstrap.sh --tests   for the test suite: as root it also installs Xvfb (GUI tests on a
#                          real X server); as a user, missing pieces only skip those tests
#   bootstrap.sh --terminal  for `chorus chat` and the benchmarks: no Qt libraries checked
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-app}
for_tests=0
[ "$mode" = --tests ] && for_tests=1

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --disable-pip-version-check -q -e '.[test]'
.venv/bin/chorus models fetch

[ "$mode" = --terminal ] && exit 0

# Debian packages this machine still needs: Qt's X11 libraries (ui/qt_platform.py reads
# them off the installed plugin with ldd), and Xvfb for the test suite.
wanted=$(.venv/bin/python -m ui.qt_platform)
if [ "$for_tests" = 1 ] && ! command -v xvfb-run >/dev/null; then
    wanted="$wanted xvfb xauth"
fi
wanted=$(echo $wanted)  # one line
[ -z "$wanted" ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing $wanted" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || true
    apt-get install -y -qq --no-install-recommends $wanted >/dev/null
elif [ "$for_tests" = 1 ]; then
    echo "bootstrap: tests on a real X server (Xvfb) will be skipped; for them: sudo apt-get install $wanted" >&2
else
    echo "bootstrap: Qt needs system libraries to open a window here. Install them with:" >&2
    echo "    sudo apt-get install $wanted" >&2
    exit 1
fi
