"""Can Qt open a window on this desktop? Checked before QApplication exists.

Qt 6.5+'s X11 platform plugin (xcb) links system libraries that a fresh Debian or Ubuntu
does not have (libxcb-cursor0, libxcb-icccm4, libxcb-keysyms1, ...). Without them the
QApplication constructor aborts the whole process (SIGABRT, exit status 134) after a
warning that is easy to miss. This module finds the missing libraries first, names the
Debian packages that provide them and gives the one command that installs them.

It imports no Qt (it runs before Qt may load), so `packaging/bootstrap.sh` uses it too:
`python -m ui.qt_platform` prints the missing packages, one a line.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# Shared libraries that Qt's xcb plugin (and the Qt GUI libraries under it) may need, and
# the Debian/Ubuntu package of each. The sonames are the same on both.
DEBIAN_PACKAGES: dict[str, str] = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-xinput.so.0": "libxcb-xinput0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb.so.1": "libxcb1",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libSM.so.6": "libsm6",
    "libICE.so.6": "libice6",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libOpenGL.so.0": "libopengl0",
    "libGLX.so.0": "libglx0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
}

_NOT_FOUND = re.compile(r"^\s*(\S+)\s*=>\s*not found", re.MULTILINE)
_DLOPEN_ERROR = re.compile(r"(\S+\.so[.\d]*): cannot open shared object file")


def xcb_plugin() -> Path | None:
    """Qt's xcb platform plugin inside the installed (or bundled) PySide6, if there."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        plugin = Path(folder) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if plugin.exists():
            return plugin
    return None


def missing_libraries(plugin: Path) -> list[str]:
    """The shared libraries the plugin needs that the dynamic loader cannot find."""
    ldd = shutil.which("ldd")
    if ldd is not None:
        out = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=30)
        return sorted(set(_NOT_FOUND.findall(out.stdout)))
    try:  # no ldd (a minimal system): the loader names the first library it misses
        ctypes.CDLL(str(plugin), mode=ctypes.RTLD_LOCAL)
    except OSError as exc:
        found = _DLOPEN_ERROR.search(str(exc))
        return [found.group(1)] if found else [str(exc)]
    return []


def packages_for(libraries: list[str]) -> list[str]:
    """Debian packages for the libraries; an unknown library is listed as itself."""
    return sorted({DEBIAN_PACKAGES.get(lib, lib) for lib in libraries})


def apt_command(packages: list[str]) -> str:
    return "sudo apt-get install " + " ".join(packages)


def uses_xcb(env: Mapping[str, str]) -> bool:
    """Whether Qt will pick its X11 plugin: asked for by name, or the default on an X
    session (a Wayland session picks the wayland plugin first)."""
    if not sys.platform.startswith("linux"):
        return False
    chosen = env.get("QT_QPA_PLATFORM", "")
    if chosen:
        return chosen.split(";")[0].split(":")[0] == "xcb"
    wayland = env.get("WAYLAND_DISPLAY") and env.get("XDG_SESSION_TYPE") == "wayland"
    return not wayland


def display_problem(env: Mapping[str, str] | None = None, plugin: Path | None = None) -> str | None:
    """Why Qt could not open a window here, as a message for a person; None when it can.
    `plugin` is the xcb plugin to check (default: PySide6's)."""
    env = os.environ if env is None else env
    if not uses_xcb(env):
        return None
    if not env.get("DISPLAY"):
        return ("Chorus cannot open a window: no display (DISPLAY is not set). Run it from a "
                "desktop session, or use `chorus chat` in a terminal.")
    plugin = plugin or xcb_plugin()
    if plugin is None:
        return None  # no xcb plugin to check: let Qt say what it finds
    missing = missing_libraries(plugin)
    if not missing:
        return None
    return (
        "Chorus cannot open a window: Qt's X11 platform plugin (xcb) needs system libraries "
        f"that are missing: {', '.join(missing)}.\n"
        f"On Debian or Ubuntu install them with:\n    {apt_command(packages_for(missing))}"
    )


def main() -> int:
    """For packaging/bootstrap.sh: the Debian packages still needed, one a line."""
    plugin = xcb_plugin()
    if plugin is None:
        print("PySide6's xcb plugin not found", file=sys.stderr)
        return 2
    for package in packages_for(missing_libraries(plugin)):
        print(package)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
