"""Tool calls and approvals outlive a closed tab and a restart (issue 39, defects 2 and 3): a
call that waits for approval when its tab closes or the app quits is asked again when the
chat opens; Stop stores the calls not run, their chips say so, and the model reads that
they never ran; "Always for this tool" holds across a restart, listed in Settings -> Tools,
where Ask again revokes it. A real MCP server (the SDK-made test server, a child process);
the model is a ScriptedEngine (what it writes is the test's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.tools import HttpServer
from app.tools.history import NOT_RUN
from tests.support.desk import Desk, open_tools_settings, scripted_engine
from tests.support.message_rows import call_row, calls_shown, chip_rect, chip_shown
from ui.widgets.chat.message_model import APPROVAL
from ui.widgets.tools.tools_settings import NO_ALWAYS

ADD_CALL = '{"name": "add", "arguments": {"a": 2, "b": 3}}'
CTRL = Qt.KeyboardModifier.ControlModifier


def _tools_ready(desk: Desk) -> None:
    desk.qtbot.waitUntil(lambda: any(t.name == "add" for t in desk.ctx.tools.tools()), timeout=60_000)


@pytest.fixture
def tools(desk, engine, shared_mcp_url):
    desk.ctx.tools.add(HttpServer("test", shared_mcp_url))  # tests/support/mcp_http.py
    _tools_ready(desk)
    yield desk.ctx.tools
    desk.ctx.tools.shutdown()


class Restarted:
    """The next start of the app on the same data folder, its MCP servers restored."""

    def __init__(self, qtbot, data_dir: Path) -> None:
        self.desk = Desk(qtbot, data_dir)
        self.engine = scripted_engine(self.desk)
        self.desk.controllers.conversations.refresh()
        self.desk.ctx.tools.restore()
        self.desk.controllers.window_state.restore()

    def close(self) -> None:
        self.desk.ctx.tools.shutdown()
        self.desk.close()


def _quit(desk: Desk) -> None:
    """What the app's shutdown writes before the storage thread goes."""
    desk.controllers.window_state.save()
    desk.settled()


def _chat_with_tools(desk: Desk, tools, title: str = "agent"):
    tab = desk.open_chat(title)
    tools.set_chat_servers(tab.conversation_id, ["test"])
    desk.qtbot.waitUntil(lambda: tab.tools_button.text() == "Tools (6)")
    return tab


def _ask(desk: Desk, tab, text: str) -> None:
    tab.composer.setFocus()
    desk.qtbot.keyClicks(tab.composer, text)
    desk.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)


def _answer(desk: Desk, engine, text: str, requests: int) -> None:
    """The engine's `requests`-th reply written as `text` and ended."""
    desk.qtbot.waitUntil(lambda: len(engine.replies()) == requests, timeout=30_000)
    request_id = engine.replies()[-1]
    engine.write(request_id, text, tokens=5)
    engine.end(request_id)


def _waiting_call(desk: Desk, engine, tools, title: str = "agent"):
    """A chat with the tools on whose reply called add: the call waits for approval."""
    tab = _chat_with_tools(desk, tools, title)
    _ask(desk, tab, "What is 2 + 3?")
    _answer(desk, engine, ADD_CALL, 1)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    return tab


def _chat_of(engine, n: int):
    """The n-th reply's ChatRequest (1-based)."""
    replies = engine.replies()
    return next(c for c in engine.chats if c.request_id == replies[n - 1])


def _stored(desk: Desk, tab):
    return desk.repo.active_path(tab.conversation_id).messages


def _open_from_sidebar(desk: Desk, conversation_id: int):
    lst = desk.window.conversation_list
    desk.controllers.conversations.refresh()
    desk.qtbot.waitUntil(lambda: lst.row_for(conversation_id) is not None)
    rect = lst.visualItemRect(lst.row_for(conversation_id))
    desk.qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    desk.qtbot.waitUntil(lambda: desk.window.tab_for(conversation_id) is not None)
    return desk.window.tab_for(conversation_id)


def test_a_call_waiting_when_its_tab_closes_is_asked_again_when_the_chat_opens(desk, engine, tools, qtbot):
    tab = _waiting_call(desk, engine, tools)
    conv_id = tab.conversation_id
    qtbot.keyClick(desk.window, Qt.Key.Key_W, CTRL)
    qtbot.waitUntil(lambda: desk.window.tab_for(conv_id) is None)
    desk.settled()
    assert [m.role for m in desk.repo.active_path(conv_id).messages] == ["user", "assistant"]

    again = _open_from_sidebar(desk, conv_id)
    qtbot.waitUntil(lambda: again.approval.isVisible())
    assert "Run add (test)" in again.approval.question.text()
    assert [(c.name, c.state) for c in calls_shown(again.view)] == [("add", APPROVAL)]
    qtbot.waitUntil(lambda: chip_rect(again.view, *call_row(again.view, "add")).contains(again.approval.geometry()))
    assert again.busy and again.state_label.text() == "add waits for your approval"
    QTest.mouseClick(again.approval.allow_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(engine.replies()) == 2, timeout=30_000)
    assert "The result of add" in _chat_of(engine, 2).messages[-1]["content"]
    assert [(m.role, m.content) for m in _stored(desk, again)][2] == ("tool", "5")


def test_a_call_waiting_when_the_app_quits_is_asked_again_after_the_restart(desk, engine, tools, qtbot, tmp_path):
    tab = _waiting_call(desk, engine, tools)
    conv_id = tab.conversation_id
    _quit(desk)

    later = Restarted(qtbot, tmp_path)
    try:
        w = later.desk.window
        qtbot.waitUntil(lambda: w.tab_for(conv_id) is not None and w.tab_for(conv_id).approval.isVisible(),
                        timeout=10_000)
        reopened = w.tab_for(conv_id)
        assert reopened.approval.question.text().startswith("Run add")
        _tools_ready(later.desk)
        QTest.mouseClick(reopened.approval.deny_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: len(later.engine.replies()) == 1, timeout=30_000)
        assert "denied by the user" in _chat_of(later.engine, 1).messages[-1]["content"]
        assert '"name": "add"' in _chat_of(later.engine, 1).messages[0]["content"], "offered the tools again"
    finally:
        later.close()


def test_stop_while_a_call_waits_stores_it_as_not_run_and_the_next_turn_knows(desk, engine, tools, qtbot):
    tab = _waiting_call(desk, engine, tools)
    qtbot.keyClick(desk.window, Qt.Key.Key_Escape)  # Stop
    qtbot.waitUntil(lambda: not tab.busy and any(c.result is not None for c in calls_shown(tab.view)))
    [chip] = calls_shown(tab.view)
    assert (chip.name, chip.state, chip.note, chip.result) == ("add", "not run", "cancelled", NOT_RUN)
    assert chip_shown(tab.view, *call_row(tab.view, "add")).startswith("▸ add · not run · cancelled")
    assert not tab.approval.isVisible() and tab.state_label.text() == "stopped before the tool's result"
    result = _stored(desk, tab)[-1].tool_result
    assert (result.name, result.cancelled) == ("add", True)

    _ask(desk, tab, "Never mind, what is 1 + 1?")
    qtbot.waitUntil(lambda: len(engine.replies()) == 2, timeout=10_000)
    prompt = [m["content"] for m in _chat_of(engine, 2).messages]
    assert any(NOT_RUN in text for text in prompt), "the model reads that the call never ran"


def test_always_for_this_tool_holds_after_a_restart_and_settings_revokes_it(desk, engine, tools, qtbot, tmp_path):
    tab = _waiting_call(desk, engine, tools)
    conv_id = tab.conversation_id
    QTest.mouseClick(tab.approval.always_button, Qt.MouseButton.LeftButton)
    _answer(desk, engine, "5.", 2)
    qtbot.waitUntil(lambda: not tab.busy)
    _quit(desk)

    later = Restarted(qtbot, tmp_path)
    try:
        lw, lengine = later.desk.window, later.engine
        qtbot.waitUntil(lambda: lw.tab_for(conv_id) is not None)
        _tools_ready(later.desk)
        again = lw.tab_for(conv_id)
        qtbot.waitUntil(lambda: again.tools_button.text() == "Tools (6)")
        _ask(later.desk, again, "And 5 + 5?")
        _answer(later.desk, lengine, '{"name": "add", "arguments": {"a": 5, "b": 5}}', 1)
        qtbot.waitUntil(lambda: len(lengine.replies()) == 2, timeout=30_000)  # ran without asking
        assert "10" in _chat_of(lengine, 2).messages[-1]["content"]
        _answer(later.desk, lengine, "10.", 2)
        qtbot.waitUntil(lambda: not again.busy)

        page = open_tools_settings(later.desk)
        listed = page.always_list
        assert [listed.item(i).text() for i in range(listed.count())] == ["add (test)"]
        assert not page.revoke_button.isEnabled()
        row = listed.visualItemRect(listed.item(0)).center()
        QTest.mouseClick(listed.viewport(), Qt.MouseButton.LeftButton, pos=row)
        QTest.mouseClick(page.revoke_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: listed.item(0).text() == NO_ALWAYS)
        qtbot.keyClick(page, Qt.Key.Key_Escape)
        qtbot.waitUntil(lambda: not page.isVisible())

        _ask(later.desk, again, "And 1 + 1?")
        _answer(later.desk, lengine, '{"name": "add", "arguments": {"a": 1, "b": 1}}', 3)
        qtbot.waitUntil(lambda: again.approval.isVisible(), timeout=10_000)
    finally:
        later.close()


def test_screenshot_of_a_call_stopped_before_it_ran(desk, engine, tools, qtbot, theme):
    from tests.support.gui_app import SCREENSHOTS
    from ui.widgets.models.model_picker import READY, ModelStatus

    tab = _waiting_call(desk, engine, tools, "A stopped call")
    qtbot.keyClick(desk.window, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: any(c.result is not None for c in calls_shown(tab.view)))
    w = desk.window  # no engine runs on the desk: the loader drawn as it is once the model is ready
    w.model_picker.set_status(ModelStatus(w.model_picker.status.name, READY))
    qtbot.wait(50)  # the last frame's repaint before the grab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert desk.window.grab().save(str(SCREENSHOTS / f"tool-stopped-{theme}.png"))
