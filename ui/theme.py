"""Light and dark palettes ("system" keeps the platform's own), and the app's stylesheet."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

from ui.icon import ICON_DIR


def _palette(colors: dict, disabled: dict) -> QPalette:
    palette = QPalette()
    for role, color in colors.items():
        palette.setColor(role, QColor(color))
    # Without the Disabled group, Fusion draws a disabled button like an enabled one
    # (Stop looked active with nothing running).
    for role, color in disabled.items():
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor(color))
    return palette


def dark_palette() -> QPalette:
    return _palette({
        QPalette.ColorRole.Window: "#202124",
        QPalette.ColorRole.WindowText: "#e8eaed",
        QPalette.ColorRole.Base: "#17181a",
        QPalette.ColorRole.AlternateBase: "#2b2d31",
        QPalette.ColorRole.Text: "#e8eaed",
        QPalette.ColorRole.Button: "#2b2d31",
        QPalette.ColorRole.ButtonText: "#e8eaed",
        QPalette.ColorRole.Highlight: "#4c8bf5",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.PlaceholderText: "#9aa0a6",
        QPalette.ColorRole.ToolTipBase: "#2b2d31",
        QPalette.ColorRole.ToolTipText: "#e8eaed",
        QPalette.ColorRole.Link: "#8ab4f8",  # readable on dark grey; pure blue was not
        QPalette.ColorRole.LinkVisited: "#c58af9",
    }, disabled={
        QPalette.ColorRole.ButtonText: "#6b6f75",
        QPalette.ColorRole.WindowText: "#6b6f75",
        QPalette.ColorRole.Text: "#6b6f75",
        QPalette.ColorRole.Button: "#26282b",
    })


def light_palette() -> QPalette:
    return _palette({
        QPalette.ColorRole.Window: "#f3f4f6",
        QPalette.ColorRole.WindowText: "#1f2328",
        QPalette.ColorRole.Base: "#ffffff",
        QPalette.ColorRole.AlternateBase: "#f1f3f5",
        QPalette.ColorRole.Text: "#1f2328",
        QPalette.ColorRole.Button: "#e9ecef",
        QPalette.ColorRole.ButtonText: "#1f2328",
        QPalette.ColorRole.Highlight: "#1a73e8",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.PlaceholderText: "#6b7280",
        QPalette.ColorRole.Link: "#0b57d0",
        QPalette.ColorRole.LinkVisited: "#7b1fa2",
    }, disabled={
        QPalette.ColorRole.ButtonText: "#a0a4ab",
        QPalette.ColorRole.WindowText: "#a0a4ab",
        QPalette.ColorRole.Text: "#a0a4ab",
        QPalette.ColorRole.Button: "#eef0f2",
    })


# The app's one stylesheet: the composer box and its buttons, the files' chips and the
# document dialog. Colours come from the palette in force (palette(...)) or are translucent
# greys that read on both themes, so one sheet serves light, dark and the system's; it is
# set again with each theme so that the palette(...) colours are looked up anew.
STYLE_SHEET = """
QFrame#composerBox {
    background: palette(base);
    border: 1px solid rgba(128, 128, 128, 110);
    border-radius: 14px;
}
QFrame#composerBox:hover { border-color: rgba(128, 128, 128, 190); }
QFrame#composerBox[typing="true"] { border-color: palette(highlight); }
QPlainTextEdit#composerText { background: transparent; border: none; }
QToolButton#attachButton, QToolButton#sendButton, QToolButton#stopButton {
    border: none;
    border-radius: 15px;
    padding: 0;
    background: transparent;
    color: palette(text);
}
QToolButton#attachButton:hover { background: rgba(128, 128, 128, 55); }
QToolButton#attachButton:pressed { background: rgba(128, 128, 128, 95); }
QToolButton#sendButton { background: palette(highlight); color: palette(highlighted-text); }
QToolButton#sendButton:hover { background: palette(link); color: palette(base); }
QToolButton#sendButton:disabled { background: rgba(128, 128, 128, 60); color: rgb(140, 140, 140); }
QToolButton#stopButton { background: palette(text); color: palette(base); }
QToolButton#stopButton:hover { background: #d93025; color: #ffffff; }
QFrame#attachmentChip {
    background: palette(alternate-base);
    border: 1px solid rgba(128, 128, 128, 110);
    border-radius: 8px;
}
QFrame#attachmentChip:hover { border-color: palette(highlight); }
QFrame#attachmentChip[state="failed"] { border-color: #e5534b; }
QLabel#chipName { font-weight: bold; }
QLabel#chipDetails { color: rgb(128, 128, 128); }
QLabel#chipDetails[failed="true"], QLabel#documentDetails[failed="true"], QLabel#composerNotice { color: #e5534b; }
QToolButton#chipClose { border: none; border-radius: 9px; padding: 0 5px; color: palette(text); }
QToolButton#chipClose:hover { background: rgba(128, 128, 128, 70); }
QProgressBar#chipProgress { border: none; border-radius: 2px; background: rgba(128, 128, 128, 60); }
QProgressBar#chipProgress::chunk { border-radius: 2px; background: palette(highlight); }
"""

# Check boxes drawn by the sheet: Fusion outlines the box in the window colour darkened, which
# all but vanished on the dark window (compare's Blind box) and was faint on the light one. A
# mid grey edge reads on both (WCAG 3:1 for UI parts); checked is the highlight with a tick.
CHECK_BOX_STYLE = f"""
QCheckBox::indicator {{
    width: 14px; height: 14px;
    border: 1px solid #808080; border-radius: 3px;
    background: palette(base);
}}
QCheckBox::indicator:hover {{ border-color: palette(highlight); }}
QCheckBox::indicator:checked {{
    background: palette(highlight); border-color: palette(highlight);
    image: url({(ICON_DIR / "check.svg").as_posix()});
}}
QCheckBox::indicator:disabled {{ border-color: rgba(128, 128, 128, 90); }}
QCheckBox::indicator:checked:disabled {{ background: rgba(128, 128, 128, 110); border-color: transparent; }}
"""

THEMES = ("system", "light", "dark")
THEME_PROPERTY = "chorusTheme"  # the theme in force, kept on the application object
_system_palette: QPalette | None = None  # Fusion's palette from the platform, before any theme


def apply_theme(app: QApplication, theme: str = "system") -> None:
    """Applies the theme to the application; callable again at any time (View → Theme):
    every widget on screen gets the new palette. "system" goes back to the platform's."""
    global _system_palette
    if _system_palette is None:
        if app.style().name().lower() != "fusion":
            app.setStyle("Fusion")
        _system_palette = QPalette(app.palette())
    palette = dark_palette() if theme == "dark" else light_palette() if theme == "light" else _system_palette
    changed = app.palette() != palette
    app.setPalette(palette)
    app.setProperty(THEME_PROPERTY, theme if theme in THEMES else "system")
    sheet = f"/* {current_theme(app)} */{STYLE_SHEET}{CHECK_BOX_STYLE}"
    # Setting a sheet repolishes every widget (0.1-0.2 s with a window open, on this CPU):
    # the same sheet on the same palette again changes nothing, so it is left as it is.
    if changed or app.styleSheet() != sheet:
        app.setStyleSheet(sheet)


def current_theme(app: QApplication) -> str:
    return app.property(THEME_PROPERTY) or "system"
