"""Renders ui/icons/chorus.svg to ui/icons/chorus.png (256 px) with Qt's own SVG renderer.

Run it after editing the SVG: `.venv/bin/python packaging/render_icon.py`. The PNG is
committed because desktop environments and window managers want a bitmap, and the app's
window icon must not depend on Qt's SVG image plugin being present.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZE = 256


def render(svg: Path, png: Path, size: int = SIZE) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"{svg} is not a valid SVG")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    if not image.save(str(png)):
        raise SystemExit(f"could not write {png}")


if __name__ == "__main__":
    render(ROOT / "ui" / "icons" / "chorus.svg", ROOT / "ui" / "icons" / "chorus.png")
    print(ROOT / "ui" / "icons" / "chorus.png")
