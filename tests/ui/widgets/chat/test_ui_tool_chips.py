"""A reply's tool calls as chips in its bubble (issue 39's look): one compact line each
(name, state, time), closed by default; a click or Enter/Space opens one to show the
arguments and the result as plain text, a failed call's "Error" in red and never coloured
as code (issue 39, defect 13: the old card labelled its result "code" and coloured an
error's quoted words as a string literal). Real widgets offscreen, real clicks and keys,
real pixels, in both themes."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QTextCursor

from tests.support.message_rows import chip_box, chip_rect, chip_shown, row_option
from tests.support.pixels import count_near
from ui.theme import dark_palette, light_palette
from ui.widgets.chat.code_highlight import COLORS, ERROR_COLORS
from ui.widgets.chat.message_delegate import bubble_color
from ui.widgets.chat.message_list import MessageList
from ui.widgets.chat.message_model import (
    APPROVAL,
    DONE,
    FAILED,
    RUNNING,
    MessageListModel,
    MessageView,
    ToolCallView,
)
from ui.widgets.chat.tool_chips import state_color

OK = ToolCallView("c1", "get_time", '{"zone": "UTC"}', DONE, "0.25 s", result='It is "noon" // now')
FAILING = ToolCallView("c2", "get_time", '{"zone": "Mars"}', FAILED, "0.01 s",
                       result='Error: unknown time zone "Mars"')


def _shown(qtbot, calls, dark=False, text=""):
    model = MessageListModel()
    model.set_messages([MessageView(key="q", role="user", text="What time is it?"),
                        MessageView(key="m1", role="assistant", text=text, calls=tuple(calls), message_id=1)])
    view = MessageList(model)
    view.setPalette(dark_palette() if dark else light_palette())
    qtbot.addWidget(view)
    view.resize(640, 600)
    view.show()
    qtbot.waitExposed(view)
    qtbot.waitUntil(lambda: view.visualRect(model.index(1)).height() > 30)
    return view


def _click(qtbot, view, row, i):
    at = chip_rect(view, row, i, "header").center()
    qtbot.waitUntil(lambda: view.indexAt(at).row() == row)  # the list laid out again after a chip opened
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=at)


def test_each_call_is_a_closed_chip_inside_its_reply_and_a_click_opens_it(qtbot):
    view = _shown(qtbot, [OK, FAILING], text="Let me look.")
    bubble = view.visualRect(view.model().index(1))
    first, second = chip_rect(view, 1, 0), chip_rect(view, 1, 1)
    assert bubble.contains(first) and bubble.contains(second) and first.bottom() < second.top()
    assert first.width() < 400, "closed, a chip is as wide as its line"
    assert chip_shown(view, 1, 0) == "▸ get_time · done · 0.25 s"
    assert chip_shown(view, 1, 1) == "▸ get_time · failed · 0.01 s"
    said = view.model().index(1).data(Qt.ItemDataRole.AccessibleTextRole)  # a screen reader's line
    assert said == "Let me look.\ntool call get_time, done, 0.25 s\ntool call get_time, failed, 0.01 s"
    _click(qtbot, view, 1, 0)
    qtbot.waitUntil(lambda: chip_shown(view, 1, 0).startswith("▾ get_time"))
    assert chip_shown(view, 1, 0).split("\n", 1)[1] == 'Arguments\n{\n  "zone": "UTC"\n}\nResult\nIt is "noon" // now'
    qtbot.waitUntil(lambda: view.visualRect(view.model().index(1)).height() > bubble.height())
    assert view.visualRect(view.model().index(1)).contains(chip_rect(view, 1, 1)), "the row grew to hold it"
    _click(qtbot, view, 1, 0)
    qtbot.waitUntil(lambda: chip_shown(view, 1, 0).startswith("▸ get_time"))


def test_enter_and_space_open_the_focused_chip_and_left_right_move_the_focus(qtbot):
    view = _shown(qtbot, [OK, FAILING])
    view.setFocus()
    view.setCurrentIndex(view.model().index(1))
    qtbot.keyClick(view, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: chip_shown(view, 1, 0).startswith("▾"))
    assert chip_shown(view, 1, 1).startswith("▸")
    qtbot.keyClick(view, Qt.Key.Key_Right)
    qtbot.keyClick(view, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: chip_shown(view, 1, 1).startswith("▾"))
    qtbot.keyClick(view, Qt.Key.Key_Left)
    qtbot.keyClick(view, Qt.Key.Key_Enter)
    qtbot.waitUntil(lambda: chip_shown(view, 1, 0).startswith("▸"))
    qtbot.keyClick(view, Qt.Key.Key_Up)  # the arrows still move among the messages
    assert view.currentIndex().row() == 0


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_a_result_is_plain_text_and_an_error_is_said_in_red_not_as_code(qtbot, dark):
    view = _shown(qtbot, [OK, FAILING], dark)
    for i in (0, 1):
        _click(qtbot, view, 1, i)
        qtbot.waitUntil(lambda i=i: chip_shown(view, 1, i).startswith("▾"))
    for i, label in ((0, "Result"), (1, "Error")):
        parts = chip_box(view, 1, i).parts
        assert [p[0] for p in parts] == ["Arguments", label]
        doc = parts[1][2]
        colours = set()
        for offset in range(1, doc.characterCount() - 1):  # each character's format, read as the cursor does
            cursor = QTextCursor(doc)
            cursor.setPosition(offset)
            if cursor.charFormat().hasProperty(cursor.charFormat().Property.ForegroundBrush):
                colours.add(cursor.charFormat().foreground().color().name())
        assert not colours & {COLORS[dark]["string"], COLORS[dark]["comment"]}, "not coloured as code"
    view.clearSelection()
    qtbot.wait(20)
    image = view.viewport().grab().toImage()
    origin = view.delegate.tools_origin(row_option(view, 1), view.model().view(1))
    label = chip_box(view, 1, 1).parts[1][1].translated(origin)
    assert count_near(image, view.viewport(), view.viewport(), label, ERROR_COLORS[dark]) > 10, "Error in red"


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_the_states_read_on_both_themes(dark):
    """Each state's colour stands out from the chip's fill (WCAG's 3:1 for large text and
    marks, at least) in either theme."""
    palette = dark_palette() if dark else light_palette()
    fill = palette.color(palette.ColorRole.Base)

    def luminance(c: QColor) -> float:
        def channel(v: float) -> float:
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
        return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF())

    for state in (APPROVAL, RUNNING, DONE, FAILED, "not run"):
        a, b = sorted((luminance(state_color(state, palette)), luminance(fill)))
        assert (b + 0.05) / (a + 0.05) >= 3, state
    assert bubble_color(palette, "assistant", "complete") != fill, "the chip shows on its bubble"


def test_a_running_call_counts_its_seconds(qtbot):
    import time

    view = _shown(qtbot, [ToolCallView("c3", "slow", '{"seconds": 30}')])
    assert chip_shown(view, 1, 0) == "▸ slow · queued" and not view._ticking.isActive()
    view.model().set_call_state("c3", RUNNING, time.monotonic() - 2)  # as the tool loop says it
    assert chip_shown(view, 1, 0).startswith("▸ slow · running · 2 s")
    assert view._ticking.isActive()  # repainted each second while it runs
    qtbot.waitUntil(lambda: chip_shown(view, 1, 0).startswith("▸ slow · running · 3 s"), timeout=3000)
    view.model().set_call_state("c3", None)  # it ended: back to what storage says (queued, no result here)
    assert view.model().view(1).calls[0].state == "queued"
    qtbot.waitUntil(lambda: not view._ticking.isActive(), timeout=3000)  # nothing runs: no more repaints


@pytest.mark.parametrize("width", [340, 700])
def test_the_approval_sits_inside_the_waiting_chip_side_by_side_or_stacked(qtbot, width):
    """The buttons lie inside the chip of the call asked about, under its arguments: side by
    side where the chip is wide enough, one above the other in a narrow column (a half of the
    split view); never wider than the chip."""
    call = ToolCallView("c9", "get_current_time", '{"timezone": "Europe/Amsterdam"}')
    view = _shown(qtbot, [OK, call])
    view.resize(width, 600)
    approval = view.approval
    approval.ask("c9", "get_current_time", "clock")
    view.model().set_call_state("c9", APPROVAL)  # as the tool loop says it, once asked
    assert chip_shown(view, 1, 1).startswith("▾ get_current_time · waiting for approval")
    qtbot.waitUntil(lambda: chip_rect(view, 1, 1).contains(approval.geometry()) and approval.width() > 0)
    arguments = chip_box(view, 1, 1).parts[0][1].translated(view.delegate.tools_origin(row_option(view, 1),
                                                                                       view.model().view(1)))
    assert approval.geometry().top() > arguments.bottom(), "under the arguments"
    tops = [b.mapTo(view.viewport(), b.rect().topLeft()).y() for b in
            (approval.allow_button, approval.always_button, approval.deny_button)]
    if width < 400:
        assert tops[0] < tops[1] < tops[2], "stacked in a narrow column"
    else:
        assert tops[0] == tops[1] == tops[2], "side by side"
    for button in (approval.allow_button, approval.always_button, approval.deny_button):
        box = QRect(button.mapTo(view.viewport(), button.rect().topLeft()), button.size())
        assert chip_rect(view, 1, 1).contains(box)
    approval.deny_button.click()
    assert approval.isHidden()
