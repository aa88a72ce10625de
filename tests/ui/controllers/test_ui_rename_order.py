"""Renaming a chat from the sidebar leaves it where it was (issue 27, defect 10): a title is
not activity, so the list, ordered by the last activity, does not re-sort under the cursor,
and the row stays selected. No model."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit


def test_a_renamed_chat_keeps_its_place_and_its_selection(desk, qtbot):
    repo, lst = desk.repo, desk.window.conversation_list
    oldest = repo.create_conversation(title="Oldest")
    for title in ("Middle", "Newest"):
        repo.create_conversation(title=title)
    desk.controllers.conversations.refresh()
    qtbot.waitUntil(lambda: lst.titles() == ["Newest", "Middle", "Oldest"])
    lst.setCurrentItem(lst.row_for(oldest.id))
    before = repo.get_conversation(oldest.id).updated_at

    dialog = lst.ask_rename(oldest.id, "Oldest", False)
    field = dialog.findChild(QLineEdit)
    field.selectAll()
    qtbot.keyClicks(field, "Walrus notes")
    qtbot.keyClick(field, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "Walrus notes" in lst.titles())
    assert lst.titles() == ["Newest", "Middle", "Walrus notes"]
    assert lst.currentItem() is lst.row_for(oldest.id)
    assert repo.get_conversation(oldest.id).updated_at == before
