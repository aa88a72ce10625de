"""The storage thread at quit (issue 35): every write asked for before the window closes is
carried out, in order, before the thread stops, even when the thread is busy and the event
loop never runs again."""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt

from storage import ChatRepository, open_database
from tests.support.desk import Desk
from ui.controllers.side_panel import PANEL_SETTING
from ui.services.threads import StorageThread


def _slowed(storage: StorageThread) -> threading.Event:
    """The storage thread held on a call until the returned event is set."""
    gate = threading.Event()
    storage.submit(gate.wait)
    return gate


def test_writes_asked_for_before_shutdown_are_drained_in_order(tmp_path):
    db = open_database(tmp_path / "chorus.db")
    repo = ChatRepository(db)
    storage = StorageThread(on_error=lambda exc: None)
    gate = _slowed(storage)
    titles = [f"chat {i}" for i in range(5)]
    for title in titles:  # asked for while the thread is busy; the loop never runs again
        storage.run(lambda t=title: repo.create_conversation(title=t))
    gate.set()
    storage.shutdown()
    assert [c.title for c in sorted(repo.list_conversations(), key=lambda c: c.id)] == titles
    db.close()


def test_a_setting_changed_by_a_key_just_before_quitting_is_there_at_the_next_start(qtbot, tmp_path):
    desk = Desk(qtbot, tmp_path)
    tab = desk.open_chat("Tides")
    desk.window.activateWindow()  # a window shortcut's key reaches only the active window
    qtbot.waitUntil(desk.window.isActiveWindow)
    desk.settled()
    gate = _slowed(desk.ctx.storage)
    qtbot.keyClick(desk.window, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert tab.panel.isVisible()  # the details panel opened: its state is to be saved
    gate.set()
    desk.close()  # at once, as the window closing does

    again = Desk(qtbot, tmp_path)
    try:
        assert again.ctx.catalog.get_setting(PANEL_SETTING) == {"open": True}
    finally:
        again.close()
