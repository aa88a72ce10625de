"""A message sent on a full disk (issue 25, item 3, the app's part): the window says so in
one line and the message goes back into the composer, so Enter sends it again once there is
room. On a real 4 MB tmpfs; no model (a scripted engine answers)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.support.desk import Desk, scripted_engine
from tests.support.filesystems import fill, small_filesystem


def test_a_message_that_cannot_be_stored_comes_back_to_the_composer(qtbot, tmp_path, qt_asyncio):
    with small_filesystem(tmp_path / "disk", "4m") as disk:
        desk = Desk(qtbot, disk)
        try:
            engine = scripted_engine(desk)
            conv = desk.repo.create_conversation(title="full")
            desk.controllers.conversations.open_conversation(conv.id)
            qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
            tab = desk.window.tab_for(conv.id)
            ballast = fill(disk, leave=64 << 10)
            message = "owl " * (256 * 1024)  # 1 MB: more than the room left
            tab.composer.setPlainText(message)
            qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
            qtbot.waitUntil(lambda: "disk is full" in desk.window.statusBar().currentMessage())
            qtbot.waitUntil(lambda: tab.send_button.isEnabled())  # not left busy
            assert tab.composer.toPlainText() == message.strip() and engine.chats == []
            ballast.unlink()
            qtbot.keyClick(tab.composer, Qt.Key.Key_Return)  # the same message, again
            qtbot.waitUntil(lambda: len(engine.chats) == 1)
            desk.settled()
            users = [m for m in desk.repo.active_path(conv.id).messages if m.role == "user"]
            assert [m.content for m in users] == [message.strip()] and tab.composer.toPlainText() == ""
        finally:
            desk.close()
