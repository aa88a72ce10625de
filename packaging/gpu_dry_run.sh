#!/usr/bin/env bash
# `make gpu-dry-run`: `make gpu-check`'s steps on this machine's CPU, as the lent GPU machine
# would run them: Python 3.12 with only the packages of that machine that the check uses
# (MACHINE_HAS in app/bench/gpu_prepare.py, from its image's list), a copy of what travels
# (the files git sends, and .gpu/) in a scratch folder, and no network (a network namespace
# of its own, `unshare -n`, as root; else pip is kept off every index and the run says it was
# not isolated). The build is llama.cpp's CPU one from the same trimmed sources; the bench
# runs 1 and 8 chats, 16 tokens each.
#
#   PY312=/path/to/python3.12  the interpreter (default: python3.12 on PATH, or pyenv's)
#   DRY=/tmp/chorus-gpu-dry    the scratch folder (its env is kept and reused)
#   KEEP_BUILD=1               reuse the last run's build folder (default: build from scratch)
# The summary and logs land in $DRY/out. A 2-core machine builds for longer than the lent
# one's 16 cores: the build gets 40 minutes here, the runs 5 minutes each.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .gpu/manifest.json ] || { echo "gpu-dry-run: no .gpu/: run make gpu-prepare first" >&2; exit 3; }

if [ -z "${PY312:-}" ]; then
    for candidate in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
        if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
            PY312=$candidate
            break
        fi
    done
fi
[ -n "${PY312:-}" ] || { echo "gpu-dry-run: no Python 3.12 (set PY312)" >&2; exit 2; }
DRY=${DRY:-/tmp/chorus-gpu-dry}
mkdir -p "$DRY"

# The lent machine's Python stand-in: made with the network, before the offline part.
if [ ! -x "$DRY/env/bin/python" ]; then
    "$PY312" -m venv "$DRY/env"
    "$DRY/env/bin/python" -m pip install -q --disable-pip-version-check $(.venv/bin/python -c \
        'from app.bench.gpu_prepare import MACHINE_HAS; print(*MACHINE_HAS)')
fi

# What travels: the tracked and untracked-not-ignored files, and .gpu/.
rm -rf "$DRY/tree" "$DRY/out"
[ "${KEEP_BUILD:-0}" = 1 ] || rm -rf "$DRY/work"
mkdir -p "$DRY/tree" "$DRY/out"
git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - | tar -xf - -C "$DRY/tree"
cp -r .gpu "$DRY/tree/.gpu"
du -sb "$DRY/tree" | awk '{printf "gpu-dry-run: %.1f MiB travel\n", $1 / 1048576}' >&2

run=(env -i PATH="$DRY/env/bin:/usr/local/bin:/usr/bin:/bin" HOME="$DRY/home" PIP_CONFIG_FILE=/dev/null
     PIP_NO_INDEX=1 PYTHON="$DRY/env/bin/python" GPU_CHECK_HARD_S=3600
     bash "$DRY/tree/packaging/gpu_check.sh" --backend cpu --chats 1 8 --sampling greedy --max-tokens 16
     --system-tokens 300 --total-s 3300 --build-s 2400 --run-s 300 --work "$DRY/work" --out "$DRY/out" "$@")
if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
    echo "gpu-dry-run: no network (unshare -n)" >&2
    unshare -n "${run[@]}"
else
    echo "gpu-dry-run: NOT isolated from the network (needs root for unshare -n); pip is kept off every index" >&2
    "${run[@]}"
fi
