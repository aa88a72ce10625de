"""The sidebar: date groups under headers that cannot be chosen, search hits with their
snippet (matched words highlighted) and a note when nothing matches, and the marks and
menu it had (the desktop issue's sidebar)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QLineEdit

from inference import LoadSettings
from tests.support.pixels import count_near
from tests.support.shown import shown
from tests.support.window import Window
from ui.widgets.window.conversation_list import (
    COMPARE_MARK,
    PIN_MARK,
    RENAME_W,
    ConversationItem,
    ConversationList,
    date_group,
)
from ui.widgets.window.sidebar_delegate import SNIPPET_ROLE, snippet_html

NOW = datetime(2026, 3, 12, 15, 0).astimezone()


@pytest.fixture
def sidebar(qtbot):
    return shown(qtbot, ConversationList(), 260, 500)


def test_date_groups():
    assert date_group(NOW.replace(hour=0, minute=1), NOW) == "Today"
    assert date_group(NOW - timedelta(days=1), NOW) == "Yesterday"
    assert date_group(NOW - timedelta(days=2), NOW) == "Last 7 days"
    assert date_group(NOW - timedelta(days=6), NOW) == "Last 7 days"
    assert date_group(NOW - timedelta(days=7), NOW) == "Older"


def test_chats_are_grouped_under_headers_that_cannot_be_chosen(sidebar, qtbot):
    items = [
        ConversationItem(1, "Old but pinned", pinned=True, updated_at=NOW - timedelta(days=40)),
        ConversationItem(2, "This morning", updated_at=NOW - timedelta(hours=5)),
        ConversationItem(3, "A comparison", comparison=True, updated_at=NOW - timedelta(hours=6)),
        ConversationItem(4, "Yesterday's", updated_at=NOW - timedelta(days=1)),
        ConversationItem(5, "Last week", updated_at=NOW - timedelta(days=4)),
        ConversationItem(6, "Long ago", updated_at=NOW - timedelta(days=90)),
    ]
    sidebar.set_items(items, now=NOW)
    texts = [sidebar.item(i).text() for i in range(sidebar.count())]
    assert texts == ["Pinned", PIN_MARK + "Old but pinned", "Today", "This morning", COMPARE_MARK + "A comparison",
                     "Yesterday", "Yesterday's", "Last 7 days", "Last week", "Older", "Long ago"]
    assert sidebar.headers() == ["Pinned", "Today", "Yesterday", "Last 7 days", "Older"]
    assert sidebar.titles() == [t for t in texts if t not in sidebar.headers()]
    header = sidebar.item(2)
    assert not header.flags() & Qt.ItemFlag.ItemIsSelectable
    opened = []
    sidebar.open_requested.connect(opened.append)
    qtbot.mouseClick(sidebar.viewport(), Qt.MouseButton.LeftButton, pos=sidebar.visualItemRect(header).center())
    qtbot.mouseClick(sidebar.viewport(), Qt.MouseButton.LeftButton,
                     pos=sidebar.visualItemRect(sidebar.item(3)).center())
    qtbot.waitUntil(lambda: opened == [2])  # the header opened nothing, the chat under it opened
    assert sidebar.currentItem() is sidebar.item(3)


def test_a_search_hit_shows_its_snippet_with_the_match_highlighted(sidebar, qtbot):
    runs = (("the keeper of the ", False), ("lighthouse", True), (" lit the lamp every night", False))
    sidebar.set_items([ConversationItem(1, "Coasts", subtitle="".join(t for t, _ in runs), snippet=runs),
                       ConversationItem(2, "Plain")], query="lighthouse")
    assert sidebar.headers() == []  # hits are ranked, not grouped by date
    assert not sidebar.empty_label.isVisible()
    hit, plain = sidebar.visualItemRect(sidebar.item(0)), sidebar.visualItemRect(sidebar.item(1))
    assert hit.height() > plain.height() + 10  # room for the snippet under the title
    link = sidebar.palette().color(QPalette.ColorRole.Link)
    html = snippet_html(runs, QColor("black"), link)
    assert f'<b style="color:{link.name()}">lighthouse</b>' in html and "keeper" in html
    sidebar.clearSelection()
    sidebar.setCurrentItem(None)
    image = sidebar.grab().toImage()
    below_title = QRect(hit.left(), hit.top() + sidebar.fontMetrics().height() + 4, hit.width(), hit.height() // 2)
    plain_row = QRect(plain.left(), plain.top(), plain.width(), plain.height() - 1)
    assert count_near(image, sidebar, sidebar.viewport(), below_title, link.name(), tolerance=30) > 10
    assert count_near(image, sidebar, sidebar.viewport(), plain_row, link.name(), tolerance=30) == 0


def test_no_hits_says_so(sidebar):
    sidebar.set_items([], query="zebra ")
    assert sidebar.empty_label.isVisibleTo(sidebar)
    assert sidebar.empty_label.text() == "No chats match “zebra”"
    sidebar.set_items([ConversationItem(1, "A chat", updated_at=NOW)], query="")
    assert not sidebar.empty_label.isVisibleTo(sidebar)
    sidebar.set_items([], query="")  # no chats at all is not a search that failed: a first-run hint
    assert sidebar.empty_label.isVisibleTo(sidebar)
    assert sidebar.empty_label.text() == "No chats yet.\nCtrl+N starts one; each chat you send is kept here."


def test_rename_asks_without_a_nested_event_loop(sidebar, qtbot):
    dialog = sidebar.ask_rename(4, "Old name", comparison=False)
    assert dialog.isVisible()  # open() returned while it is up
    dialog.setTextValue("  New name ")
    with qtbot.waitSignal(sidebar.rename_requested) as renamed:
        dialog.accept()
    assert renamed.args == [4, "New name"]


def test_the_rename_dialog_is_wide_enough_for_a_long_title(sidebar, qtbot):
    """Issue 27, defect 10: it opened a couple of words wide."""
    title = "Comparing merge sort and quicksort on nearly sorted input"
    dialog = sidebar.ask_rename(4, title, comparison=False)
    qtbot.waitUntil(dialog.isVisible)
    edit = dialog.findChild(QLineEdit)
    assert dialog.width() >= RENAME_W
    assert edit.width() >= edit.fontMetrics().horizontalAdvance(title)


# ----- through the controller, on a real chat database -------------------------------------------


@pytest.fixture
def window(qtbot, tmp_path, qt_asyncio):
    shell = Window(qtbot, tmp_path, LoadSettings(model_path=tmp_path / "none.gguf"))
    w = shell.window
    w.repo, w.controllers = shell.repo, shell.controllers
    w.show()
    yield w
    shell.close()


def test_search_shows_snippets_and_an_empty_result_from_storage(window, qtbot):
    repo, lst = window.repo, window.conversation_list
    sea = repo.create_conversation(title="Sea")
    repo.add_message(sea.id, "user", "Tell me why the lighthouse keeper climbs the stairs each night.")
    repo.create_conversation(title="Cooking")
    window.controllers.conversations.refresh()
    qtbot.waitUntil(lambda: lst.titles() == ["Cooking", "Sea"])
    assert lst.headers() == ["Today"]
    window.search_box.setText("lighthouse")
    qtbot.waitUntil(lambda: lst.titles() == ["Sea"])
    runs = lst.rows()[0].data(SNIPPET_ROLE)
    assert ("lighthouse", True) in runs and "keeper" in "".join(t for t, _ in runs)
    window.search_box.setText("zebras")
    qtbot.waitUntil(lambda: lst.count() == 0 and lst.empty_label.isVisibleTo(lst))
    assert lst.empty_label.text() == "No chats match “zebras”"
    window.search_box.clear()
    qtbot.waitUntil(lambda: len(lst.titles()) == 2)
    assert not lst.empty_label.isVisibleTo(lst)
