"""The themes' palettes: disabled controls look disabled, links and code blocks are
readable in both (the desktop issue's defect 5). Real widgets, offscreen, real pixels."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QPushButton

from ui.theme import dark_palette, light_palette
from ui.widgets.message_delegate import code_style_sheet


def _contrast(a: QColor, b: QColor) -> float:
    """WCAG contrast ratio of two colours."""
    def lum(c: QColor) -> float:
        def ch(v: float) -> float:
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
        return 0.2126 * ch(c.redF()) + 0.7152 * ch(c.greenF()) + 0.0722 * ch(c.blueF())
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("palette", [light_palette(), dark_palette()], ids=["light", "dark"])
def test_a_disabled_button_is_drawn_unlike_an_enabled_one(qtbot, qapp, palette) -> None:
    qapp.setStyle("Fusion")
    shots = []
    for enabled in (True, False):
        button = QPushButton("Stop")
        button.setPalette(palette)
        button.setEnabled(enabled)
        button.resize(120, 32)
        qtbot.addWidget(button)
        image = button.grab().toImage()
        # The darkest (light theme) or lightest (dark theme) pixel is the label's ink.
        ink = [image.pixelColor(x, y) for x in range(image.width()) for y in range(image.height())]
        shots.append(min(ink, key=lambda c: c.lightness()) if palette is not None and
                     palette.color(QPalette.ColorRole.Window).lightness() > 128
                     else max(ink, key=lambda c: c.lightness()))
    enabled_ink, disabled_ink = shots
    assert abs(enabled_ink.lightness() - disabled_ink.lightness()) > 40


@pytest.mark.parametrize("palette", [light_palette(), dark_palette()], ids=["light", "dark"])
def test_links_are_readable_on_the_window(palette) -> None:
    link = palette.color(QPalette.ColorRole.Link)
    assert _contrast(link, palette.color(QPalette.ColorRole.Base)) >= 4.5
    assert link != QColor("#0000ff")


@pytest.mark.parametrize("palette", [light_palette(), dark_palette()], ids=["light", "dark"])
def test_code_blocks_have_a_visible_box(palette) -> None:
    from ui.widgets.message_delegate import bubble_color

    sheet = code_style_sheet(palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.Link))
    code_bg = QColor(sheet.split("pre, code {")[1].split("background-color:")[1].split(";")[0].strip())
    bubble = bubble_color(palette, "assistant", "complete")
    assert _contrast(code_bg, bubble) >= 1.15  # a box you can see against the bubble
