"""The chats' area on its own (tab_area.TabArea, real widgets, no window and no controllers):
the welcome page while nothing is open, opening and closing tabs, the split view, and which
half the keys go to. The keys are pressed where the user's go: the focused widget."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel

from tests.support.shown import shown
from ui.widgets.compare.compare_view import CompareView
from ui.widgets.window.tab_area import TabArea


@pytest.fixture
def area(qtbot) -> TabArea:
    made = shown(qtbot, TabArea(QLabel("welcome")), 900, 500)
    made.activateWindow()  # only an active window has a focus widget
    qtbot.waitUntil(made.isActiveWindow)
    return made


def _recorded(signal) -> list:
    seen: list = []
    signal.connect(lambda *args: seen.append(args[0] if args else None))
    return seen


def test_the_welcome_page_shows_until_a_tab_opens_and_again_when_the_last_closes(area, qtbot):
    assert area.chat_stack.currentWidget() is area.welcome
    title = "A title much longer than a tab shows whole"
    tab = area.open_tab(1, title)
    assert area.chat_stack.currentWidget() is area.tabs and area.current_tab() is tab
    shown = area.tabs.tabText(0)
    assert shown.endswith("…") and title.startswith(shown[:-1]) and title[len(shown) - 1] == " ", shown  # at a word
    qtbot.waitUntil(lambda: QApplication.focusWidget() is tab.composer)  # a new chat is for typing into
    assert area.open_tab(1, "again") is tab and area.tabs.count() == 1  # reopened, not opened twice
    closed = _recorded(area.tab_closed)
    area.close_current()
    assert closed == [1] and area.tab_for(1) is None
    assert area.chat_stack.currentWidget() is area.welcome


def test_tabs_step_round_and_a_comparison_closes_as_one(area):
    chats = [area.open_tab(i, f"chat {i}") for i in (1, 2)]
    view, made = area.open_compare(7, "")
    assert made and area.open_compare(7, "")[1] is False
    assert area.tabs.tabText(2).endswith("New comparison") and area.compare_for(7) is view
    area.step_tab(1)
    assert area.current_tab() is chats[0]  # after the last, the first
    area.step_tab(-1)
    assert area.current_tab() is view
    closed, compared = _recorded(area.tab_closed), _recorded(area.comparison_closed)
    area.close_tab(area.tabs.indexOf(view))
    assert (closed, compared) == ([], [7]) and area.open_comparisons() == []
    assert area.open_tabs() == chats


def test_split_right_and_the_keys_follow_the_half_the_user_is_in(area, qtbot):
    rivers, lighthouses = area.open_tab(1, "Rivers"), area.open_tab(2, "Lighthouses")
    changed, active = _recorded(area.split_changed), _recorded(area.active_view_changed)
    area.split_right(True)  # the other tab goes beside the one in front
    assert area.split_tab() is rivers and area.tabs.count() == 1 and changed == [None]
    assert area.split_pane.title_label.text() == "Rivers" and area.split_pane.header.property("active")
    assert area.current_tab() is rivers and area.open_tabs() == [lighthouses, rivers]
    assert area.is_showing(rivers) and area.is_showing(lighthouses)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is rivers.composer)
    qtbot.keyClicks(QApplication.focusWidget(), "Nile")  # typed into the split's chat
    assert rivers.composer.toPlainText() == "Nile"
    qtbot.mouseClick(lighthouses.view.viewport(), Qt.MouseButton.LeftButton)  # a click into the tab bar's chat
    qtbot.waitUntil(lambda: area.current_tab() is lighthouses)
    assert not area.split_pane.header.property("active") and len(active) >= 2
    area.set_tab_title(rivers, "Long rivers")
    assert area.split_pane.title_label.text() == "Long rivers"
    rivers.composer.setFocus()
    qtbot.waitUntil(lambda: area.current_tab() is rivers)
    closed = _recorded(area.tab_closed)
    area.close_current()  # the split's chat, which ends the split
    assert closed == [1] and area.split_tab() is None and not area.split_pane.isVisible()
    assert area.current_tab() is lighthouses


def test_split_right_with_one_tab_asks_for_a_new_chat_and_opens_it_there(area):
    first = area.open_tab(1, "First")
    asked = _recorded(area.new_chat_needed)
    area.split_right(True)
    assert asked == [None] and area.split_tab() is None
    second = area.open_tab(2, "Second")  # the chat the request made
    assert area.split_tab() is second and area.tabs.currentWidget() is first
    area.close_split()  # its chat back to the tab bar, after the one in front, in front
    assert [area.tabs.widget(i) for i in range(2)] == [first, second] and area.current_tab() is second


def test_the_last_tab_closed_beside_the_split_brings_its_chat_back_as_a_tab(area):
    rivers, lighthouses = area.open_tab(1, "Rivers"), area.open_tab(2, "Lighthouses")
    area.open_in_split(rivers, 0.3)
    assert area.chat_split.ratio == pytest.approx(0.3)
    area.close_tab_of(lighthouses.conversation_id)
    assert area.split_tab() is None and area.tabs.count() == 1 and area.tabs.widget(0) is rivers
    assert area.chat_stack.currentWidget() is area.tabs
    assert area.view_for(1) is rivers and area.view_for(2) is None
    assert isinstance(area.open_compare(3, "c")[0], CompareView) and area.view_for(3) is None
