"""The line icons (ui/widgets/common/glyphs.py): drawn in the colour asked, once per name,
colour and size (every chip and composer asks for them again)."""

from __future__ import annotations

from PySide6.QtGui import QColor

from ui.widgets.common.glyphs import glyph_pixmap


def test_a_glyph_is_drawn_once_per_name_colour_and_size(qapp):
    red = glyph_pixmap("paperclip", QColor("#cc0000"), 18)
    assert glyph_pixmap("paperclip", QColor(204, 0, 0), 18).cacheKey() == red.cacheKey()
    assert glyph_pixmap("paperclip", QColor("#0000cc"), 18).cacheKey() != red.cacheKey()
    assert glyph_pixmap("paperclip", QColor("#cc0000"), 24).cacheKey() != red.cacheKey()
    image = red.toImage()
    inked = [image.pixelColor(x, y) for x in range(image.width()) for y in range(image.height())
             if image.pixelColor(x, y).alpha() == 255]
    assert inked and all(c.red() > 150 and c.blue() < 60 for c in inked)  # drawn in the colour asked
