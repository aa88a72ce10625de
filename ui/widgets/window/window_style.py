"""The main window's own rules for its chrome: the model loader at the top, the sidebar's
toggle and the split view's header, with their hover states. Colours come from the palette
in force (palette(...)) or are translucent greys that read on both themes, so the one sheet
serves light, dark and the system's; the window sets it again when its palette changes, so
that palette(...) is looked up anew (ui/theme.py does the same for the app's sheet)."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from ui.icon import TAB_CLOSE_SVG

WINDOW_STYLE = """
QFrame#modelLoader {
    background: palette(base);
    border: 1px solid rgba(128, 128, 128, 110);
    border-radius: 10px;
}
QFrame#modelLoader:hover { border-color: palette(highlight); }
QToolButton#modelButton { padding: 1px 6px; border: none; border-radius: 6px; }
QToolButton#modelButton:hover { background: rgba(128, 128, 128, 45); }
QToolButton#sidebarButton { padding: 2px 8px; border: none; border-radius: 6px; }
QToolButton#sidebarButton:hover { background: rgba(128, 128, 128, 55); }
QWidget#splitHeader {
    background: palette(alternate-base);
    border-bottom: 2px solid rgba(128, 128, 128, 60);
}
QWidget#splitHeader[active="true"] { border-bottom: 2px solid palette(highlight); }
QLabel#splitTitle { font-weight: bold; }
"""

# Every tab's close button the same grey cross, shaded on hover: the style's stock pixmap
# was a red square on the tab in front, read as a warning (issue 39, defect 13).
TAB_CLOSE_STYLE = f"""
QTabBar::close-button {{ image: url({TAB_CLOSE_SVG.as_posix()}); border-radius: 4px; }}
QTabBar::close-button:hover {{ background: rgba(128, 128, 128, 70); }}
"""


def style_window(window: QWidget) -> None:
    """Sets the window's sheet; again after a theme or font change (the marker makes it a new
    one, which polishes every widget under it again)."""
    marker = f"{window.palette().window().color().name()} {window.font().toString()}"
    sheet = f"/* {marker} */{WINDOW_STYLE}{TAB_CLOSE_STYLE}"
    if window.styleSheet() != sheet:  # a sheet set again re-polishes, which changes the palette
        window.setStyleSheet(sheet)
