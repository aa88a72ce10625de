#!/usr/bin/env bash
# Builds the desktop app as one folder, dist/chorus/ (executable: dist/chorus/chorus), with
# PyInstaller from packaging/chorus.spec. Needs the development set-up (.venv); installs the
# `packaging` extra (PyInstaller) into it when missing. The default model is not bundled.
set -euo pipefail
cd "$(dirname "$0")/.."

# Also installs Qt's X11 libraries (as root) so that PyInstaller finds and bundles them.
bash packaging/bootstrap.sh
if ! .venv/bin/python -c "import PyInstaller" 2>/dev/null; then
    .venv/bin/python -m pip install --disable-pip-version-check -q -e '.[test,packaging]'
fi
start=$(date +%s)
.venv/bin/python -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath dist --workpath build/pyinstaller packaging/chorus.spec
echo "built dist/chorus in $(( $(date +%s) - start )) s, $(du -sh dist/chorus | cut -f1)"
