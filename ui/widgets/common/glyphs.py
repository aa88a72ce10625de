"""Small line icons drawn from SVG paths in a colour of the palette: the one font the app can
count on (DejaVu) has no paperclip, and an emoji would be a box on most Linux desktops."""

from __future__ import annotations

from functools import lru_cache

from PySide6.QtCore import QByteArray, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer

# 24x24 strokes (the Feather icon set's shapes, MIT licensed).
PATHS = {
    "paperclip": '<path d="M21.44 11.05l-9.19 9.19a6 6 0 0 1-8.49-8.49l9.19-9.19a4 4 0 0 1 5.66 5.66'
                 'l-9.2 9.19a2 2 0 0 1-2.83-2.83l8.49-8.48"/>',
    "send": '<line x1="12" y1="19" x2="12" y2="5"/><polyline points="5 12 12 5 19 12"/>',
    "stop": '<rect x="6" y="6" width="12" height="12" rx="1.5" fill="{color}"/>',
    "tool": '<path d="M14.7 6.3a1 1 0 0 0 0 1.4l1.6 1.6a1 1 0 0 0 1.4 0l3.77-3.77a6 6 0 0 1-7.94 7.94'
            'l-6.91 6.91a2.12 2.12 0 0 1-3-3l6.91-6.91a6 6 0 0 1 7.94-7.94l-3.76 3.76z"/>',
    "file": '<path d="M14 2H6a2 2 0 0 0-2 2v16a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V8z"/><polyline points="14 2 14 8 20 8"/>',
}


def glyph_pixmap(name: str, color: QColor, size: int, ratio: float = 2.0) -> QPixmap:
    """The glyph drawn once per name, colour and size (every chip and composer asks again:
    ~50 SVG renders a window, 0.2 ms each); a QPixmap is shared, copied only if painted on."""
    return _drawn(name, color.name(), size, ratio)  # #rrggbb: the SVG is drawn opaque


@lru_cache(maxsize=256)
def _drawn(name: str, color: str, size: int, ratio: float) -> QPixmap:
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="{{color}}" '
           f'stroke-width="2.2" stroke-linecap="round" stroke-linejoin="round">{PATHS[name]}</svg>')
    renderer = QSvgRenderer(QByteArray(svg.replace("{color}", color).encode()))
    pixmap = QPixmap(int(size * ratio), int(size * ratio))
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    renderer.render(painter, QRectF(0, 0, pixmap.width(), pixmap.height()))
    painter.end()
    pixmap.setDevicePixelRatio(ratio)
    return pixmap


def glyph_icon(name: str, color: QColor, size: int = 18) -> QIcon:
    return QIcon(glyph_pixmap(name, color, size))


def icon_size(size: int = 18) -> QSize:
    return QSize(size, size)
