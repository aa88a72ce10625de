#!/usr/bin/env bash
# The built bundle, end to end, on a scratch data folder: it starts on a real X server
# (Xvfb, through Qt's xcb plugin as on a desktop; offscreen where Xvfb is missing, never in
# CI), creates and
# migrates its database, loads the default model in its engine process, answers one prompt
# through the real window and controller, checks the reply is saved, and exits 0.
#
#   packaging/smoke_bundle.sh            # links the model the development set-up fetched
#   packaging/smoke_bundle.sh --fetch    # lets the bundle download it itself (no pip in there)
set -euo pipefail
cd "$(dirname "$0")/.."

bundle=dist/chorus
[ -x "$bundle/chorus" ] || { echo "no bundle at $bundle: run packaging/build_bundle.sh first" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/models"
if [ "${1:-}" != --fetch ]; then
    model=$(.venv/bin/chorus models path 2>/dev/null || true)
    if [ -n "$model" ] && [ -f "$model" ]; then
        ln -s "$model" "$scratch/models/"  # no second 98 MB download
    fi
fi
export CHORUS_DATA_DIR=$scratch
display=()
if command -v xvfb-run >/dev/null; then
    export QT_QPA_PLATFORM=xcb
    display=(xvfb-run -a -s "-screen 0 1280x800x24")
elif [ "${CI:-}" = true ]; then
    echo "smoke: xvfb-run is missing (packaging/bootstrap.sh --tests installs it)" >&2; exit 1
else
    export QT_QPA_PLATFORM=offscreen
fi
start=$(date +%s%N)
# The bundle fetches the default model itself if it is not there (first start).
status=0
timeout 900 "${display[@]}" "$bundle/chorus" app --smoke-prompt "Say hi in three words." 2>"$scratch/stderr" || status=$?
grep -v "propagateSizeHints" "$scratch/stderr" >&2 || true  # drop the offscreen plugin's noise
[ "$status" = 0 ] || { echo "smoke: the bundle exited with status $status" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
# The About dialog's versions: from package metadata the spec must have copied in.
about=$(grep "^chorus: Chorus " "$scratch/stderr" || true)
grep -q "Chorus $version (bundle)" <<<"$about" || { echo "smoke: the bundle does not report Chorus $version" >&2; exit 1; }
if grep -q unknown <<<"$about"; then echo "smoke: a version is unknown in the bundle: $about" >&2; exit 1; fi
grep -q "platform: $QT_QPA_PLATFORM" <<<"$about" || { echo "smoke: the bundle did not run on $QT_QPA_PLATFORM: $about" >&2; exit 1; }
# A second process of the same bundle reads what the first one saved.
listed=$("$bundle/chorus" list)
echo "$listed"
grep -q "Say hi in three words." <<<"$listed" || { echo "smoke: the saved conversation is not listed" >&2; exit 1; }
echo "smoke: passed in $(( ($(date +%s%N) - start) / 1000000 )) ms"
