"""The split view (issue 27): two chats side by side, each with its own composer, opened
with View → Split right (Ctrl+\\) or a tab's "Open in split", both on screen (both replies
at the visible tab's priority), and closed back to one. The keys are pressed on the window;
a scripted engine answers, and one test runs both chats on the real model."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMenu

from inference.params import PRIORITY_TAB, PRIORITY_VISIBLE_TAB
from tests.support.desk import Desk
from ui.widgets.models.model_picker import READY, ModelStatus

CTRL = Qt.KeyboardModifier.ControlModifier


@pytest.fixture(autouse=True)
def active(request, qtbot) -> None:
    """The window in front, as the user's is: only an active window has a focus widget."""
    if "desk" in request.fixturenames:
        window = request.getfixturevalue("desk").window
        window.activateWindow()
        qtbot.waitUntil(window.isActiveWindow)


def _press(qtbot, key, modifiers=Qt.KeyboardModifier.NoModifier) -> None:
    """A key pressed where the user's keys go: the focused widget."""
    qtbot.keyClick(QApplication.focusWidget(), key, modifiers)


def _two_chats(desk: Desk):
    return desk.open_chat("Rivers"), desk.open_chat("Lighthouses")  # the second is in front


def _send(qtbot, tab, text: str) -> None:
    tab.composer.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is tab.composer)
    qtbot.keyClicks(tab.composer, text)
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)


def test_split_right_shows_two_chats_side_by_side_and_closes_back_to_one(desk, qtbot):
    w = desk.window
    rivers, lighthouses = _two_chats(desk)
    _press(qtbot, Qt.Key.Key_Backslash, CTRL)
    qtbot.waitUntil(lambda: w.split_tab() is rivers)
    assert w.split_pane.isVisible() and rivers.isVisible() and lighthouses.isVisible()
    assert w.tabs.indexOf(rivers) == -1 and w.tabs.currentWidget() is lighthouses
    assert w.split_pane.title_label.text() == "Rivers"
    assert w.menus.split_action.isChecked()
    left, right = w.chat_split.sizes()
    assert abs(left - right) <= 2  # halves
    assert rivers.composer.geometry().width() > 0 and lighthouses.composer.isVisible()  # a composer each
    assert QApplication.focusWidget() is rivers.composer  # the new half takes the typing
    assert w.current_tab() is rivers and w.is_showing(rivers) and w.is_showing(lighthouses)
    assert w.tab_for(rivers.conversation_id) is rivers
    _press(qtbot, Qt.Key.Key_Backslash, CTRL)
    qtbot.waitUntil(lambda: w.split_tab() is None)
    assert not w.split_pane.isVisible() and not w.menus.split_action.isChecked()
    assert w.tabs.count() == 2 and w.tabs.currentWidget() is rivers  # back in the bar, in front
    assert w.tabs.tabText(w.tabs.indexOf(rivers)) == "Rivers"


def test_with_one_tab_split_right_opens_a_new_chat_beside_it(desk, qtbot):
    w = desk.window
    only = desk.open_chat("Alone")
    _press(qtbot, Qt.Key.Key_Backslash, CTRL)
    qtbot.waitUntil(lambda: w.split_tab() is not None)
    assert w.split_tab() is not only and w.tabs.count() == 1 and w.tabs.currentWidget() is only
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.split_tab().composer)


def test_a_tabs_context_menu_opens_it_in_the_split(desk, qtbot):
    w = desk.window
    rivers, lighthouses = _two_chats(desk)
    menu = w.tabs.tab_menu(w.tabs.indexOf(rivers))
    split = next(a for a in menu.actions() if a.text() == "Open in split")
    assert split.isEnabled()
    split.trigger()
    qtbot.waitUntil(lambda: w.split_tab() is rivers)
    menu.close()
    # With one tab left in the bar there is nothing to put beside it.
    only = w.tabs.tab_menu(0)
    assert not next(a for a in only.actions() if a.text() == "Open in split").isEnabled()
    only.close()
    bar = w.tabs.tabBar()
    bar.customContextMenuRequested.emit(bar.tabRect(0).center())  # a right click pops it up
    qtbot.waitUntil(lambda: any(m.isVisible() for m in w.tabs.findChildren(QMenu)))
    for m in w.tabs.findChildren(QMenu):
        m.close()


def test_both_halves_send_and_stream_at_the_visible_priority(desk, engine, qtbot, monkeypatch):
    w = desk.window
    rivers, lighthouses = _two_chats(desk)
    _press(qtbot, Qt.Key.Key_Backslash, CTRL)
    qtbot.waitUntil(lambda: w.split_tab() is rivers)
    _send(qtbot, rivers, "Name a long river.")
    qtbot.waitUntil(lambda: len(engine.requests) == 1)
    _send(qtbot, lighthouses, "Name a lighthouse.")
    qtbot.waitUntil(lambda: len(engine.requests) == 2)
    assert [c.priority for c in engine.chats] == [PRIORITY_VISIBLE_TAB, PRIORITY_VISIBLE_TAB]
    for request in engine.requests:
        engine.write(request, "Some words ")
    qtbot.waitUntil(lambda: all(t.model.view(t.model.rowCount() - 1).text.startswith("Some words") for t in
                                (rivers, lighthouses)))
    changed: list[tuple[str, int]] = []
    monkeypatch.setattr(engine, "set_priority", lambda rid, priority: changed.append((rid, priority)))
    w.close_split()  # the split's chat comes back to the bar in front
    assert w.tabs.currentWidget() is rivers
    assert changed == [(engine.requests[1], PRIORITY_TAB)]  # the chat now behind drops back
    for request in engine.requests:
        engine.end(request)
    qtbot.waitUntil(lambda: rivers.send_button.isEnabled() and lighthouses.send_button.isEnabled())


def test_the_keys_act_on_the_half_the_user_is_in(desk, qtbot):
    w = desk.window
    rivers, lighthouses = _two_chats(desk)
    _press(qtbot, Qt.Key.Key_Backslash, CTRL)
    qtbot.waitUntil(lambda: w.split_tab() is rivers)
    lighthouses.composer.setFocus()
    qtbot.waitUntil(lambda: w.current_tab() is lighthouses)
    assert not w.split_pane.header.property("active")
    qtbot.mouseClick(rivers.view.viewport(), Qt.MouseButton.LeftButton)  # a click into the split
    qtbot.waitUntil(lambda: w.current_tab() is rivers)
    assert w.split_pane.header.property("active")
    _press(qtbot, Qt.Key.Key_L, CTRL)  # Focus composer: the split's
    qtbot.waitUntil(lambda: QApplication.focusWidget() is rivers.composer)
    _press(qtbot, Qt.Key.Key_W, CTRL)  # Close tab: the split's chat, which ends the split
    qtbot.waitUntil(lambda: w.split_tab() is None)
    assert w.tab_for(rivers.conversation_id) is None and w.tabs.count() == 1


def test_closing_the_last_tab_beside_the_split_makes_its_chat_a_tab_again(desk, qtbot):
    w = desk.window
    rivers, lighthouses = _two_chats(desk)
    w.open_in_split(rivers)
    w.close_tab_of(lighthouses.conversation_id)
    qtbot.waitUntil(lambda: w.split_tab() is None)
    assert w.tabs.count() == 1 and w.tabs.widget(0) is rivers and w.chat_stack.currentWidget() is w.tabs


def test_the_split_and_the_hidden_sidebar_survive_a_restart(desk, qtbot, tmp_path):
    w = desk.window
    rivers, lighthouses = _two_chats(desk)
    w.open_in_split(rivers)
    _press(qtbot, Qt.Key.Key_B, CTRL)  # the sidebar hidden
    qtbot.waitUntil(lambda: not w.sidebar.isVisible())
    desk.controllers.window_state.save()  # as the app's shutdown does
    desk.settled()
    again = Desk(qtbot, tmp_path)  # the next start, on the same data
    try:
        aw = again.window
        again.controllers.window_state.restore()
        qtbot.waitUntil(lambda: aw.split_tab() is not None, timeout=10_000)
        assert aw.split_tab().conversation_id == rivers.conversation_id
        assert aw.tabs.count() == 1 and aw.tabs.currentWidget().conversation_id == lighthouses.conversation_id
        assert not aw.sidebar.isVisible() and not aw.menus.sidebar_action.isChecked()
    finally:
        again.close()


@pytest.mark.model
def test_two_chats_side_by_side_both_reply_on_the_real_model(qtbot, data_dir, model_path, qt_asyncio):
    from tests.support.gui_app import App

    app = App(qtbot, data_dir, model_path, max_tokens=24)
    try:
        w = app.window
        w.activateWindow()
        qtbot.waitUntil(w.isActiveWindow)
        left = app.new_tab()
        _send(qtbot, left, "Tell me about rivers.")
        _press(qtbot, Qt.Key.Key_Backslash, CTRL)  # one tab: a new chat opens beside it
        qtbot.waitUntil(lambda: w.split_tab() is not None, timeout=10_000)
        right = w.split_tab()
        qtbot.waitUntil(lambda: QApplication.focusWidget() is right.composer)
        qtbot.keyClicks(right.composer, "Tell me about lighthouses.")
        qtbot.keyClick(right.composer, Qt.Key.Key_Return)
        app.wait_done(left, right)
        for tab in (left, right):
            assert app.last(tab).status == "complete" and len(app.last(tab).text) > 10
        assert app.last(left).text != app.last(right).text  # each answered its own question
        _press(qtbot, Qt.Key.Key_Backslash, CTRL)
        qtbot.waitUntil(lambda: w.split_tab() is None)
        assert w.tabs.count() == 2
    finally:
        app.close()


RIVER = ("The **Nile** is usually named the longest, at about 6,650 km, though some measurements "
         "put the Amazon ahead:\n\n| river | length |\n|---|---|\n| Nile | 6,650 km |\n| Amazon | 6,400 km |")
LIGHT = ("The **Tower of Hercules** in Spain is the oldest lighthouse still in use, built by the "
         "Romans in the 1st century.\n\n```python\nprint('still shining')\n```")


def test_screenshot_of_the_split_view(desk, engine, qtbot, theme):
    from tests.support.gui_app import SCREENSHOTS

    w = desk.window
    rivers, lighthouses = _two_chats(desk)
    desk.controllers.conversations.refresh()  # both in the sidebar
    _press(qtbot, Qt.Key.Key_Backslash, CTRL)
    qtbot.waitUntil(lambda: w.split_tab() is rivers)
    _send(qtbot, lighthouses, "Which lighthouse is the oldest?")
    _send(qtbot, rivers, "Which river is the longest?")
    qtbot.waitUntil(lambda: len(engine.requests) == 2)
    for request, text in zip(engine.requests, (LIGHT, RIVER)):
        engine.write(request, text, tokens=40)
        engine.end(request)
    qtbot.waitUntil(lambda: rivers.send_button.isEnabled() and lighthouses.send_button.isEnabled())
    qtbot.waitUntil(lambda: all(t.model.rowCount() == 2 for t in (rivers, lighthouses)))
    # No engine runs on the desk: the loader drawn as it is once the model is ready.
    w.model_picker.set_status(ModelStatus(w.model_picker.status.name, READY))
    qtbot.wait(50)  # the last frame's repaint before the grab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    image = w.grab()
    assert image.save(str(SCREENSHOTS / f"split-view-{theme}.png"))
    left, right = lighthouses.mapTo(w, lighthouses.rect().center()), rivers.mapTo(w, rivers.rect().center())
    assert left.x() < right.x() and abs(left.y() - right.y()) < 40  # side by side


def _ratio(w) -> float:
    left, right = w.chat_split.sizes()
    return left / (left + right)


def test_the_divider_stays_when_the_approval_shows_and_after_a_restart(desk, qtbot, tmp_path):
    """Issue 39, defect 12: the split's divider moved when a tool call's approval bar came
    up, and came back at another ratio after a restart. (The approval is in the call's chip
    now, laid over the message list: still asked of both halves.)"""
    w = desk.window
    w.resize(900, 600)
    qtbot.waitUntil(lambda: w.width() == 900)
    rivers, lighthouses = _two_chats(desk)
    _press(qtbot, Qt.Key.Key_Backslash, CTRL)
    qtbot.waitUntil(lambda: w.split_tab() is rivers)
    total = sum(w.chat_split.sizes())
    w.chat_split.moveSplitter(int(total * 0.6), 1)  # the user drags the divider
    qtbot.waitUntil(lambda: abs(_ratio(w) - 0.6) < 0.02)
    for _ in range(3):  # its layouts done
        QApplication.processEvents()
    before = w.chat_split.sizes()
    for tab in (rivers, lighthouses):
        tab.approval.ask("call-1", "get_current_time", "clock")
        qtbot.waitUntil(tab.approval.isVisible)
        for _ in range(3):  # the layouts the bar asked for, done
            QApplication.processEvents()
        assert tab.approval.question.text().startswith("Run get_current_time")
        assert w.chat_split.sizes() == before
        tab.approval.dismiss()
    desk.controllers.window_state.save()
    desk.settled()

    again = Desk(qtbot, tmp_path)  # the next start, on the same data
    try:
        aw = again.window
        again.controllers.window_state.restore()
        qtbot.waitUntil(lambda: aw.split_tab() is not None)
        qtbot.waitUntil(lambda: abs(_ratio(aw) - 0.6) < 0.02)
        aw.resize(1200, 700)  # a wider window keeps the ratio too
        qtbot.waitUntil(lambda: aw.width() == 1200)
        qtbot.waitUntil(lambda: abs(_ratio(aw) - 0.6) < 0.02)
    finally:
        again.close()
