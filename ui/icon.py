"""The app icon, from files next to this module: ui/icons/ in a source tree or an installed
package, and the same relative place under the bundle's folder when frozen (the spec puts it
there), so one path works everywhere."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QIcon, QImageReader

ICON_DIR = Path(__file__).resolve().parent / "icons"
ICON_PNG = ICON_DIR / "chorus.png"
ICON_SVG = ICON_DIR / "chorus.svg"
TAB_CLOSE_SVG = ICON_DIR / "tab-close.svg"  # a mid grey that reads on both themes


def app_icon() -> QIcon:
    # The PNG always loads; the SVG adds sharp large sizes where Qt's SVG plugin is present.
    icon = QIcon(str(ICON_PNG))
    icon.addFile(str(ICON_SVG))
    return icon


def action_icon(name: str) -> QIcon | None:
    """A message action's icon (ui/icons/action-NAME.svg, a mid grey that reads on both
    themes), or None where Qt cannot read SVG: the action then shows its word."""
    path = ICON_DIR / f"action-{name}.svg"
    if not path.is_file() or b"svg" not in {bytes(f.data()) for f in QImageReader.supportedImageFormats()}:
        return None
    return QIcon(str(path))
