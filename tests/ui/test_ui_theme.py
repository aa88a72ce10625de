"""The themes' palettes: disabled controls look disabled, links and code blocks are
readable in both (the desktop issue's defect 5). Real widgets, offscreen, real pixels."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QPushButton

from ui.theme import dark_palette, light_palette
from ui.widgets.chat.message_delegate import code_style_sheet


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
    from ui.widgets.chat.message_delegate import bubble_color

    sheet = code_style_sheet(palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.Link))
    code_bg = QColor(sheet.split("pre, code {")[1].split("background-color:")[1].split(";")[0].strip())
    bubble = bubble_color(palette, "assistant", "complete")
    assert _contrast(code_bg, bubble) >= 1.15  # a box you can see against the bubble


@pytest.mark.parametrize("palette", [light_palette(), dark_palette()], ids=["light", "dark"])
def test_visited_links_and_disabled_text_read_right(palette) -> None:
    window = palette.color(QPalette.ColorRole.Window)
    assert _contrast(palette.color(QPalette.ColorRole.LinkVisited), palette.color(QPalette.ColorRole.Base)) >= 4.5
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
        enabled = _contrast(palette.color(QPalette.ColorGroup.Active, role), window)
        disabled = _contrast(palette.color(QPalette.ColorGroup.Disabled, role), window)
        assert 1.8 <= disabled < enabled / 2, role  # dimmer, yet still legible


@pytest.mark.parametrize("name", ["light", "dark"])
def test_switching_live_gives_widgets_the_theme_s_disabled_and_link_colours(qtbot, qapp, name) -> None:
    from PySide6.QtWidgets import QLabel

    from ui.theme import apply_theme

    expected = {"light": light_palette(), "dark": dark_palette()}[name]
    other = "dark" if name == "light" else "light"
    button, label = QPushButton("Stop"), QLabel('<a href="x">link</a>')
    button.setEnabled(False)
    for widget in (button, label):
        qtbot.addWidget(widget)
        widget.show()
    try:
        apply_theme(qapp, other)
        apply_theme(qapp, name)  # live, over another theme: nothing of the other may stay
        disabled = (QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText)
        qtbot.waitUntil(lambda: button.palette().color(*disabled) == expected.color(*disabled))
        assert label.palette().color(QPalette.ColorRole.Link) == expected.color(QPalette.ColorRole.Link)
    finally:
        apply_theme(qapp, "system")


@pytest.mark.parametrize(("first", "then"), [("light", "dark"), ("dark", "light")])
def test_the_model_picker_s_hover_follows_a_theme_switched_live(qtbot, qapp, first, then) -> None:
    """The picker's button has a style sheet (for its menu indicator): after View → Theme it
    drew its hover panel in the old palette, a white box on the dark window."""
    from PySide6.QtCore import Qt

    from tests.support.shown import shown
    from ui.theme import apply_theme
    from ui.widgets.models.model_picker import READY, ModelPicker, ModelStatus

    apply_theme(qapp, first)
    try:
        picker = shown(qtbot, ModelPicker(), 400, 30)
        picker.set_status(ModelStatus("SmolLM2-135M-Instruct.Q4_1.gguf", READY))
        apply_theme(qapp, then)
        button = picker.button
        qtbot.waitUntil(lambda: button.palette().color(QPalette.ColorRole.Window) ==
                        qapp.palette().color(QPalette.ColorRole.Window))
        button.setAttribute(Qt.WidgetAttribute.WA_UnderMouse, True)  # the pointer on it: offscreen has none
        image = button.grab().toImage()
        panel = image.pixelColor(image.width() // 2, image.height() - 3)  # under the text, inside the frame
        window = qapp.palette().color(QPalette.ColorRole.Window)
        assert abs(panel.lightness() - window.lightness()) < 60, (panel.name(), window.name())
    finally:
        apply_theme(qapp, "system")


@pytest.mark.parametrize("name", ["light", "dark"])
def test_a_checkbox_s_box_stands_out_from_the_window(qtbot, qapp, name) -> None:
    """Issue 39, defect 13: compare's Blind box was a dark square on the dark window (Fusion
    outlines it in the window colour darkened); its edge must read against the window."""
    from PySide6.QtWidgets import QCheckBox, QStyle, QStyleOptionButton

    from tests.support.shown import shown
    from ui.theme import apply_theme

    apply_theme(qapp, name)
    try:
        for checked in (False, True):
            box = shown(qtbot, QCheckBox("Blind"), 120, 30)
            box.setChecked(checked)
            option = QStyleOptionButton()
            box.initStyleOption(option)
            square = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, box)
            image = box.grab().toImage()
            window = qapp.palette().color(QPalette.ColorRole.Window)
            edge = max((image.pixelColor(x, y) for x in range(square.left(), square.right() + 1)
                        for y in range(square.top(), square.bottom() + 1)), key=lambda c: _contrast(c, window))
            assert _contrast(edge, window) >= 3.0, (name, checked, edge.name(), window.name())  # WCAG's for UI parts
    finally:
        apply_theme(qapp, "system")


def test_the_same_theme_again_repolishes_nothing_and_another_does(qtbot, qapp) -> None:
    """Setting the application's sheet repolishes every widget (0.14 s each time a test's
    window was open); the same theme again has nothing to change."""
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QLabel

    from ui.theme import apply_theme

    class StyleChanges(QObject):
        count = 0

        def eventFilter(self, watched, event):  # noqa: N802 (Qt's name)
            if event.type() == QEvent.Type.StyleChange:
                self.count += 1
            return False

    label = QLabel("Chorus")
    qtbot.addWidget(label)
    label.show()
    changes = StyleChanges()
    label.installEventFilter(changes)
    try:
        apply_theme(qapp, "light")
        seen = changes.count
        apply_theme(qapp, "light")
        assert changes.count == seen
        apply_theme(qapp, "dark")
        assert changes.count > seen
    finally:
        apply_theme(qapp, "system")
