#!/usr/bin/env bash
# Installs (or removes) Chorus's desktop entry and icon for the current user, in the XDG
# folders: $XDG_DATA_HOME (default ~/.local/share)/applications and .../icons/hicolor.
#
#   packaging/install_desktop.sh                   # runs the bundle if built (dist/chorus), else `chorus` on PATH
#   packaging/install_desktop.sh --bundle DIR      # runs DIR/chorus (a copied bundle folder)
#   packaging/install_desktop.sh --command PATH    # runs PATH (e.g. .venv/bin/chorus, or an installed `chorus`)
#   packaging/install_desktop.sh --uninstall
set -euo pipefail
cd "$(dirname "$0")/.."

data_home=${XDG_DATA_HOME:-$HOME/.local/share}
apps=$data_home/applications
icons=$data_home/icons/hicolor

mode=auto target=""
case "${1:-}" in
    --bundle) mode=bundle target=${2:?--bundle needs the bundle folder} ;;
    --command) mode=command target=${2:?--command needs the chorus executable} ;;
    --uninstall) mode=uninstall ;;
    "") ;;
    *) echo "usage: $0 [--bundle DIR | --command PATH | --uninstall]" >&2; exit 2 ;;
esac

if [ "$mode" = uninstall ]; then
    rm -f "$apps/chorus.desktop" "$icons/scalable/apps/chorus.svg" "$icons/256x256/apps/chorus.png"
    echo "removed the Chorus desktop entry and icons from $data_home"
    exit 0
fi
if [ "$mode" = auto ]; then
    if [ -x dist/chorus/chorus ]; then
        mode=bundle target=dist/chorus
    else
        mode=command target=$(command -v chorus || true)
        [ -n "$target" ] || { echo "no bundle (dist/chorus) and no chorus on PATH: build or install Chorus first" >&2; exit 2; }
    fi
fi
[ "$mode" = bundle ] && target=$target/chorus
[ -x "$target" ] || { echo "$target is not an executable" >&2; exit 2; }
exe=$(cd "$(dirname "$target")" && pwd)/$(basename "$target")

mkdir -p "$apps" "$icons/scalable/apps" "$icons/256x256/apps"
install -m 644 ui/icons/chorus.svg "$icons/scalable/apps/chorus.svg"
install -m 644 ui/icons/chorus.png "$icons/256x256/apps/chorus.png"
# Exec and TryExec point at the absolute executable; a path with spaces is quoted as the
# Desktop Entry spec asks.
quoted=$exe
case "$exe" in *" "*) quoted="\"$exe\"" ;; esac
sed -e "s|^Exec=.*|Exec=$quoted app|" -e "s|^TryExec=.*|TryExec=$exe|" packaging/linux/chorus.desktop > "$apps/chorus.desktop"
chmod 644 "$apps/chorus.desktop"
if command -v update-desktop-database >/dev/null; then update-desktop-database -q "$apps" || true; fi
echo "installed $apps/chorus.desktop (runs $exe app) and the icon into $icons"
