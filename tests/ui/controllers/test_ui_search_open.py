"""A chat opened from a sidebar search hit shows the message that matched (issue 27, defect
10): the list scrolls to the first message with the search words and selects it, rather than
opening at the bottom; the newest text is no longer followed for that opening. No model."""

from __future__ import annotations

from PySide6.QtCore import Qt

from ui.widgets.window.sidebar_delegate import SNIPPET_ROLE

FILLER = "A paragraph about the weather, long enough to take a few lines in the bubble. " * 4


def _long_chat(repo, match_at: int):
    conv = repo.create_conversation(title="Long chat")
    for i in range(40):
        words = " The walrus question came up here." if i == match_at else ""
        repo.add_message(conv.id, "user" if i % 2 == 0 else "assistant", f"{i}. {FILLER}{words}")
    return conv


def _visible(view, row: int) -> bool:
    return view.visualRect(view.model().index(row, 0)).intersects(view.viewport().rect())


def test_a_search_hit_opens_its_chat_at_the_match(desk, qtbot):
    conv = _long_chat(desk.repo, match_at=5)
    desk.repo.create_conversation(title="Another chat")
    desk.controllers.conversations.refresh()
    w, lst = desk.window, desk.window.conversation_list
    qtbot.waitUntil(lambda: len(lst.titles()) == 2)
    qtbot.keyClicks(w.search_box, "walrus")
    qtbot.waitUntil(lambda: lst.titles() == ["Long chat"])
    row = lst.row_for(conv.id)
    qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, pos=lst.visualItemRect(row).center())

    qtbot.waitUntil(lambda: w.tab_for(conv.id) is not None and w.tab_for(conv.id).model.rowCount() == 40)
    view = w.tab_for(conv.id).view
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and _visible(view, 5))
    desk.settled()  # the rows below laid out meanwhile: the match is still in sight
    qtbot.waitUntil(lambda: _visible(view, 5))
    assert view.currentIndex().row() == 5  # selected: its bubble is outlined
    assert bar.value() < bar.maximum()
    assert not _visible(view, 39)  # not opened at the bottom
    qtbot.keyClick(view, Qt.Key.Key_End)  # the user's own scroll ends the hold on the match
    qtbot.waitUntil(lambda: _visible(view, 39))
    assert view.following


def test_a_search_finds_words_inside_an_attached_document_and_says_which(desk, qtbot):
    from storage import NewDocument
    from tests.support.documents import new_document

    doc: NewDocument = new_document("The flux capacitor needs 1.21 gigawatts.", name="specs.md")
    conv = desk.repo.create_conversation(title="Time machine")
    desk.repo.add_message(conv.id, "user", "What does it need?", documents=(doc,))
    desk.controllers.conversations.refresh()
    w, lst = desk.window, desk.window.conversation_list
    qtbot.waitUntil(lambda: lst.titles() == ["Time machine"])
    qtbot.keyClicks(w.search_box, "gigawatts")
    qtbot.waitUntil(lambda: lst.row_for(conv.id) is not None and "gigawatts" in lst.row_for(conv.id).toolTip())
    assert lst.row_for(conv.id).toolTip().startswith("in specs.md: ")


def test_down_then_enter_in_the_search_box_opens_the_highlighted_hit(desk, qtbot):
    """Issue 39, defect 11: Down and Enter in the search box did nothing; only a click opened
    a hit. Down highlights the next hit (the focus stays in the box), Enter opens it."""
    first = _long_chat(desk.repo, match_at=3)
    second = _long_chat(desk.repo, match_at=7)
    desk.repo.rename(second.id, "Second long chat")
    desk.controllers.conversations.refresh()
    w, lst = desk.window, desk.window.conversation_list
    qtbot.waitUntil(lambda: len(lst.titles()) == 2)
    w.search_box.setFocus()
    qtbot.keyClicks(w.search_box, "walrus")
    qtbot.waitUntil(lambda: len(lst.titles()) == 2 and all(r.data(SNIPPET_ROLE) for r in lst.rows()))
    hits = [int(r.data(Qt.ItemDataRole.UserRole)) for r in lst.rows()]
    qtbot.keyClick(w.search_box, Qt.Key.Key_Down)
    qtbot.waitUntil(lambda: lst.currentItem() is lst.rows()[0])
    qtbot.keyClick(w.search_box, Qt.Key.Key_Down)
    qtbot.waitUntil(lambda: lst.currentItem() is lst.rows()[1])
    qtbot.keyClick(w.search_box, Qt.Key.Key_Up)
    qtbot.waitUntil(lambda: lst.currentItem() is lst.rows()[0])
    assert w.search_box.hasFocus()
    qtbot.keyClick(w.search_box, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: w.tab_for(hits[0]) is not None and w.tabs.currentWidget() is w.tab_for(hits[0]))
    assert w.tab_for(hits[1]) is None
    assert {first.id, second.id} == set(hits)


def test_a_search_hit_on_a_tools_result_opens_the_replys_chip_that_holds_it(desk, qtbot):
    """A tool's result is no row of its own (it is on its call's chip, in the reply that
    made the call): a hit on it selects that reply and opens the chip, the result in sight."""
    from storage import ToolCallRecord, ToolResultRecord
    from tests.support.message_rows import call_row, chip_shown

    repo = desk.repo
    conv = repo.create_conversation(title="Tides")
    repo.add_message(conv.id, "user", "When is high tide?")
    repo.add_message(conv.id, "assistant", "", tool_calls=[ToolCallRecord("c1", "tides", '{"port": "Brest"}')])
    repo.add_message(conv.id, "tool", "High tide at 17:42, coefficient 95 (a springtide).",
                     tool_result=ToolResultRecord("c1", "tides", duration_s=0.2))
    repo.add_message(conv.id, "assistant", "At 17:42.")
    repo.create_conversation(title="Another chat")
    desk.controllers.conversations.refresh()
    w, lst = desk.window, desk.window.conversation_list
    qtbot.waitUntil(lambda: len(lst.titles()) == 2)
    qtbot.keyClicks(w.search_box, "springtide")
    qtbot.waitUntil(lambda: lst.titles() == ["Tides"] and lst.row_for(conv.id) is not None)
    qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, pos=lst.visualItemRect(lst.row_for(conv.id)).center())
    qtbot.waitUntil(lambda: w.tab_for(conv.id) is not None and w.tab_for(conv.id).model.rowCount() == 3)
    view = w.tab_for(conv.id).view
    row, i = call_row(view, "tides")
    qtbot.waitUntil(lambda: view.currentIndex().row() == row)  # the reply with the chip, selected
    assert chip_shown(view, row, i).startswith("▾ tides · done · 0.20 s") and "springtide" in chip_shown(view, row, i)
