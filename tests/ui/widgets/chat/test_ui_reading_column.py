"""The reading column (issue 39's look): in a wide window the bubbles keep to a centred
column of at most READING_WIDTH, a user's message set in from its left; in a narrow one
(a compare pane) they use the row. Real widgets, the painted pixels read back."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint

from tests.support.message_rows import row_document, row_option
from tests.support.pixels import pixel
from ui.theme import light_palette
from ui.widgets.chat.message_delegate import READING_WIDTH, USER_INDENT, bubble_color, bubble_rect
from ui.widgets.chat.message_list import MessageList
from ui.widgets.chat.message_model import MessageListModel, MessageView

LONG = " ".join(["The lamp stays still while the lens turns around it."] * 12)


def _shown(qtbot, width: int) -> MessageList:
    model = MessageListModel()
    model.set_messages([MessageView(key="u", role="user", text="Why does the light turn?", status="complete"),
                        MessageView(key="a", role="assistant", text=LONG, status="complete")])
    view = MessageList(model)
    view.setPalette(light_palette())
    qtbot.addWidget(view)
    view.resize(width, 600)
    view.show()
    qtbot.waitExposed(view)
    qtbot.waitUntil(lambda: view.visualRect(model.index(1)).height() > 60)
    return view


def _painted_span(view: MessageList, row: int) -> tuple[int, int]:
    """The leftmost and rightmost x of the row's bubble colour on its middle line, as painted."""
    image = view.viewport().grab().toImage()
    rect = view.visualRect(view.model().index(row))
    colour = bubble_color(view.palette(), view.model().view(row).role, "complete").name()
    y = rect.top() + 8
    xs = [x for x in range(rect.left(), rect.right()) if pixel(image, view.viewport(), view.viewport(),
                                                                 QPoint(x, y)).name() == colour]
    assert xs, f"no bubble colour {colour} on row {row}"
    return min(xs), max(xs)


def test_in_a_wide_window_the_bubbles_are_a_centred_column_and_the_users_is_set_in(qtbot):
    view = _shown(qtbot, 1400)
    reply_left, reply_right = _painted_span(view, 1)
    assert reply_right - reply_left <= READING_WIDTH + 1
    middle = view.viewport().width() / 2
    assert abs((reply_left + reply_right) / 2 - middle) <= 2  # centred
    user_left, user_right = _painted_span(view, 0)
    assert user_right == reply_right and user_left >= reply_left + USER_INDENT - 1
    # the reply's text wraps within the column, not across the window
    assert row_document(view, 1).textWidth() <= READING_WIDTH


@pytest.mark.parametrize("width", [420, 700])
def test_in_a_narrow_row_the_bubbles_use_the_row(qtbot, width):
    view = _shown(qtbot, width)
    reply_left, reply_right = _painted_span(view, 1)
    row = view.visualRect(view.model().index(1))
    assert reply_left <= row.left() + 12 and reply_right >= row.right() - 12
    option = row_option(view, 0)
    user = bubble_rect(option.rect, "user")
    assert (user.left() > row.left() + USER_INDENT) == (width >= 700)  # set in only where there is room
