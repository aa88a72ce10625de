"""The app icon, from files next to this module: ui/icons/ in a source tree or an installed
package, and the same relative place under the bundle's folder when frozen (the spec puts it
there), so one path works everywhere."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QIcon

ICON_DIR = Path(__file__).resolve().parent / "icons"
ICON_PNG = ICON_DIR / "chorus.png"
ICON_SVG = ICON_DIR / "chorus.svg"
TAB_CLOSE_SVG = ICON_DIR / "tab-close.svg"  # a mid grey that reads on both themes


def app_icon() -> QIcon:
    # The PNG always loads; the SVG adds sharp large sizes where Qt's SVG plugin is present.
    icon = QIcon(str(ICON_PNG))
    icon.addFile(str(ICON_SVG))
    return icon
