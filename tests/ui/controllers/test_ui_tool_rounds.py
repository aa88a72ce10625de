"""A chat's tool rounds in the window (issue 24): a reply offered the chat's MCP tools that
ends as a call waits for the user's approval inside its chip in the reply (issue 39); Allow
runs it on a real MCP server (the SDK-made test server, a child process), Deny tells the
model so, Always stops asking for that tool; the result is stored as a tool message, shown
on the call's chip (name, state, time) that opens on a click or Enter, and the next turn
goes to the engine under the same prompt with the result added. The model is a
ScriptedEngine here (what it writes is the test's); the real model's forced call is at the
end."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from app.tools import DENIED, HttpServer
from app.tools.history import STOPPED
from tests.support.desk import Desk
from tests.support.gui_app import App
from tests.support.message_rows import call_row, calls_shown, chip_rect, chip_shown
from ui.widgets.chat.message_model import APPROVAL, DONE, FAILED, NOT_RUN, RUNNING
from ui.widgets.chat.message_model import STOPPED as STOPPED_STATE
from ui.widgets.models.model_picker import READY, ModelStatus
from ui.widgets.window.tab_activity import TabState

ADD_CALL = '{"name": "add", "arguments": {"a": 2, "b": 3}}'


def _with_test_server(ctx, qtbot, url: str) -> None:
    """The shared test MCP server (tests/support/mcp_http.py), named "test" for this window."""
    ctx.tools.add(HttpServer("test", url))
    qtbot.waitUntil(lambda: any(t.name == "add" for t in ctx.tools.tools()), timeout=60_000)


@pytest.fixture
def tools(desk, engine, shared_mcp_url):
    _with_test_server(desk.ctx, desk.qtbot, shared_mcp_url)
    yield desk.ctx.tools
    desk.ctx.tools.shutdown()


def _chat_with_tools(desk, tools, title="agent"):
    tab = desk.open_chat(title)
    tools.set_chat_servers(tab.conversation_id, ["test"])
    desk.qtbot.waitUntil(lambda: tab.tools_button.text() == "Tools (6)")
    return tab


def _ask(desk, tab, text: str) -> None:
    tab.composer.setFocus()
    desk.qtbot.keyClicks(tab.composer, text)
    desk.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)


def _answer(desk, engine, text: str, requests: int) -> str:
    """The engine's `requests`-th request written as `text` and ended; its request id."""
    desk.qtbot.waitUntil(lambda: len(engine.requests) == requests, timeout=10_000)
    request_id = engine.requests[-1]
    engine.write(request_id, text, tokens=5)
    engine.end(request_id)
    return request_id


def _stored(desk, tab):
    return desk.repo.active_path(tab.conversation_id).messages


def test_a_call_waits_for_approval_runs_on_the_server_and_the_next_turn_reads_its_result(desk, engine, tools):
    tab = _chat_with_tools(desk, tools)
    _ask(desk, tab, "What is 2 + 3?")
    _answer(desk, engine, ADD_CALL, 1)
    first = engine.chats[0]
    assert '"name": "add"' in first.messages[0]["content"], "the tools are described in the system message"
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    assert "Run add (test)" in tab.approval.question.text()
    assert tab.busy and tab.state_label.text() == "add waits for your approval"
    # The call is a chip in the reply that made it, its buttons inside the chip.
    row, i = call_row(tab.view, "add")
    assert tab.model.view(row).role == "assistant" and [(c.name, c.state) for c in calls_shown(tab.view)] \
        == [("add", APPROVAL)]
    assert chip_shown(tab.view, row, i).startswith("▾ add · waiting for approval") and '"a": 2' in \
        chip_shown(tab.view, row, i)
    desk.qtbot.waitUntil(lambda: chip_rect(tab.view, row, i).contains(tab.approval.geometry()))
    desk.qtbot.waitUntil(lambda: desk.controllers.background.state_of(tab.conversation_id)
                         .state is TabState.TOOL)  # the sidebar row and the tab's mark too
    assert all('"name"' not in v.text for v in tab.model.views()), "the call's JSON is not shown as text"
    reply = _stored(desk, tab)[-1]
    assert (reply.content, [c.name for c in reply.tool_calls]) == ("", ["add"])
    assert json.loads(reply.tool_calls[0].arguments) == {"a": 2, "b": 3}

    QTest.mouseClick(tab.approval.allow_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 2, timeout=30_000)
    assert tab.approval.isHidden()
    second = engine.chats[1]
    assert second.messages[: len(first.messages)] == first.messages, "the next turn extends the same prompt"
    assert "The result of add" in second.messages[-1]["content"] and "5" in second.messages[-1]["content"]
    tool = _stored(desk, tab)[2]
    assert (tool.role, tool.content, tool.tool_result.name, tool.tool_result.denied) == ("tool", "5", "add", False)
    chips = calls_shown(tab.view)
    assert [(c.name, c.state, c.result) for c in chips] == [("add", DONE, "5")]
    assert chips[0].took.endswith(" s")
    assert chip_shown(tab.view, *call_row(tab.view, "add")).startswith(f"▸ add · done · {chips[0].took}")

    _answer(desk, engine, "2 + 3 is 5.", 2)
    desk.qtbot.waitUntil(lambda: not tab.busy and tab.model.views()[-1].text == "2 + 3 is 5.")
    assert [m.role for m in _stored(desk, tab)] == ["user", "assistant", "tool", "assistant"]
    assert [v.role for v in tab.model.views()] == ["user", "assistant", "assistant"], "the result is on the chip"
    assert tab.conversation_id not in desk.ctx.waiting_on_tools()


def test_deny_tells_the_model_and_runs_nothing(desk, engine, tools):
    tab = _chat_with_tools(desk, tools)
    _ask(desk, tab, "What is 2 + 3?")
    _answer(desk, engine, ADD_CALL, 1)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    QTest.mouseClick(tab.approval.deny_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 2, timeout=10_000)
    assert DENIED in engine.chats[1].messages[-1]["content"]
    tool = _stored(desk, tab)[2]
    assert (tool.content, tool.tool_result.denied) == (DENIED, True)
    assert [(c.state, c.note) for c in calls_shown(tab.view)] == [(NOT_RUN, "denied")]
    assert chip_shown(tab.view, *call_row(tab.view, "add")).startswith("▸ add · not run · denied")


def test_the_chips_buttons_are_reached_with_tab_and_deny_by_space_stores_not_run(desk, engine, tools):
    """The keyboard alone: the waiting chip's Allow has the focus, Tab goes on to Always and
    Deny (each named for a screen reader), Space on Deny stores the call as not run."""
    tab = _chat_with_tools(desk, tools)
    _ask(desk, tab, "What is 2 + 3?")
    _answer(desk, engine, ADD_CALL, 1)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    approval = tab.approval
    desk.qtbot.waitUntil(lambda: QApplication.focusWidget() is approval.allow_button)
    names = [approval.allow_button.accessibleName()]
    for button in (approval.always_button, approval.deny_button):
        desk.qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        desk.qtbot.waitUntil(lambda b=button: QApplication.focusWidget() is b)
        names.append(button.accessibleName())
    assert names == ["Allow once", "Always for this tool", "Deny"]
    desk.qtbot.keyClick(approval.deny_button, Qt.Key.Key_Space)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 2, timeout=10_000)
    assert _stored(desk, tab)[2].tool_result.denied
    desk.qtbot.waitUntil(lambda: [(c.state, c.note) for c in calls_shown(tab.view)] == [(NOT_RUN, "denied")])


def test_always_for_this_tool_runs_its_next_call_without_asking(desk, engine, tools):
    tab = _chat_with_tools(desk, tools)
    _ask(desk, tab, "Add twice.")
    _answer(desk, engine, ADD_CALL, 1)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    QTest.mouseClick(tab.approval.always_button, Qt.MouseButton.LeftButton)
    _answer(desk, engine, '{"name": "add", "arguments": {"a": 5, "b": 5}}', 2)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 3, timeout=30_000)
    assert not tab.approval.isVisible()
    assert [m.content for m in _stored(desk, tab) if m.role == "tool"] == ["5", "10"]


def test_the_chip_opens_on_a_click_and_on_enter_to_show_the_arguments_and_the_result(desk, engine, tools):
    tab = _chat_with_tools(desk, tools)
    _ask(desk, tab, "What is 2 + 3?")
    _answer(desk, engine, ADD_CALL, 1)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    QTest.mouseClick(tab.approval.allow_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: [c.state for c in calls_shown(tab.view)] == [DONE], timeout=30_000)
    row, i = call_row(tab.view, "add")
    collapsed = chip_rect(tab.view, row, i)
    assert chip_shown(tab.view, row, i).startswith("▸ add · done · ") and '"a": 2' not in chip_shown(tab.view, row, i)
    _click_chip(desk, tab, row, i)
    desk.qtbot.waitUntil(lambda: chip_shown(tab.view, row, i).startswith("▾ add"))
    shown = chip_shown(tab.view, row, i)
    assert '"a": 2' in shown and shown.split("\n")[-2:] == ["Result", "5"], "the result as plain text"
    desk.qtbot.waitUntil(lambda: chip_rect(tab.view, row, i).height() > collapsed.height())
    # The keyboard: the list focused on the reply's row, Enter closes the chip and Space opens it.
    tab.view.setFocus()
    tab.view.setCurrentIndex(tab.model.index(row, 0))
    desk.qtbot.keyClick(tab.view, Qt.Key.Key_Return)
    desk.qtbot.waitUntil(lambda: chip_shown(tab.view, row, i).startswith("▸ add"))
    desk.qtbot.keyClick(tab.view, Qt.Key.Key_Space)
    desk.qtbot.waitUntil(lambda: chip_shown(tab.view, row, i).startswith("▾ add"))


def test_stop_gives_up_a_call_that_hangs_and_the_chat_is_free_again(desk, engine, tools):
    tab = _chat_with_tools(desk, tools)
    _ask(desk, tab, "Sleep.")
    _answer(desk, engine, '{"name": "slow", "arguments": {"seconds": 30}}', 1)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    QTest.mouseClick(tab.approval.allow_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: tab.state_label.text() == "running slow…")
    assert [c.state for c in calls_shown(tab.view)] == [RUNNING] and tab.approval.isHidden()
    desk.qtbot.waitUntil(lambda: " · 1 s" in chip_shown(tab.view, *call_row(tab.view, "slow")), timeout=5_000)
    desk.qtbot.waitUntil(lambda: desk.window.conversation_list is not None
                         and desk.controllers.background.state_of(tab.conversation_id).detail == "running slow")
    QTest.mouseClick(tab.stop_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: not tab.busy)
    assert tab.state_label.text() == "stopped before the tool's result"
    assert len(engine.requests) == 1 and tab.conversation_id not in desk.ctx.waiting_on_tools()
    _ask(desk, tab, "Never mind.")  # the chat takes a new message at once
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 2, timeout=10_000)


def test_a_chat_without_tools_on_is_offered_none(desk, engine, tools):
    tab = desk.open_chat("plain")
    assert tab.tools_button.text() == "Tools"
    _ask(desk, tab, "What is 2 + 3?")
    _answer(desk, engine, ADD_CALL, 1)
    desk.qtbot.waitUntil(lambda: not tab.busy)
    assert all("add" not in str(m.get("content")) for m in engine.chats[0].messages[:1])
    assert not tab.approval.isVisible()
    assert tab.model.views()[-1].text == ADD_CALL, "no tools offered: the text is an answer"


def _click_chip(desk, tab, row, i) -> None:
    at = chip_rect(tab.view, row, i, "header").center()
    desk.qtbot.waitUntil(lambda: tab.view.indexAt(at).row() == row)  # the list laid out, as the user sees it
    QTest.mouseClick(tab.view.viewport(), Qt.MouseButton.LeftButton, pos=at)


# ----- the real model ----------------------------------------------------------------------------


@pytest.mark.model
def test_the_real_model_made_to_call_writes_a_call_that_validates_and_then_answers(qtbot, tmp_path, model_path,
                                                                                   shared_mcp_url):
    app = App(qtbot, tmp_path, model_path, max_tokens=40)
    try:
        _with_test_server(app.ctx, qtbot, shared_mcp_url)
        tab = app.new_tab()
        app.ctx.tools.set_chat_servers(tab.conversation_id, ["test"])
        app.ctx.tools.set_chat_required(tab.conversation_id, True)
        app.ctx.tools.set_settings(app.ctx.tools.settings.__class__(max_rounds=2))  # call, then answer
        app.send(tab, "Use the add tool to add 2 and 3.")
        qtbot.waitUntil(lambda: tab.approval.isVisible(), timeout=120_000)
        call = app.repo.active_path(tab.conversation_id).messages[-1].tool_calls[0]
        tool = app.ctx.tools.chat_tools(tab.conversation_id)
        schema = next(t.input_schema for t in tool if t.name == call.name)
        arguments = json.loads(call.arguments)
        assert set(schema.get("required", ())) <= arguments.keys()
        QTest.mouseClick(tab.approval.allow_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: [m.role for m in app.repo.active_path(tab.conversation_id).messages]
                        == ["user", "assistant", "tool", "assistant"], timeout=60_000)
        app.wait_done(tab)
        final = app.repo.active_path(tab.conversation_id).messages[-1]
        assert final.content and not final.tool_calls, "the last round answers in text"
        tool_message = app.repo.active_path(tab.conversation_id).messages[2]
        assert tool_message.tool_result.name == call.name and not tool_message.tool_result.denied
    finally:
        app.close()


def test_two_agent_tabs_run_their_tools_at_once(desk, engine, tools):
    """One call hangs (slow) in the first tab while the second's runs, is answered and its
    chat goes on: a chat waiting on a tool holds nothing of another's."""
    slow_tab, quick_tab = _chat_with_tools(desk, tools, "slow"), _chat_with_tools(desk, tools, "quick")
    desk.window.tabs.setCurrentWidget(slow_tab)
    _ask(desk, slow_tab, "Sleep a while.")
    _answer(desk, engine, '{"name": "slow", "arguments": {"seconds": 3}}', 1)
    desk.qtbot.waitUntil(lambda: slow_tab.approval.isVisible())
    QTest.mouseClick(slow_tab.approval.allow_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: desk.ctx.waiting_on_tools().get(slow_tab.conversation_id) == "running slow")
    desk.window.tabs.setCurrentWidget(quick_tab)
    _ask(desk, quick_tab, "What is 2 + 3?")
    _answer(desk, engine, ADD_CALL, 2)
    desk.qtbot.waitUntil(lambda: quick_tab.approval.isVisible())
    QTest.mouseClick(quick_tab.approval.allow_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 3, timeout=30_000)
    assert "The result of add" in engine.chats[2].messages[-1]["content"], "the quick chat went on first"
    assert desk.ctx.waiting_on_tools().get(slow_tab.conversation_id) == "running slow"
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 4, timeout=30_000)
    assert "slept 3" in engine.chats[3].messages[-1]["content"]


def test_a_turns_calls_run_at_once_each_chip_saying_its_own_state_and_the_results_stored_in_order(
        desk, engine, tools):
    """Two calls in one turn, the first the longer: the second is asked about while the first
    runs, both chips say "running" at once, the second's says "done" first, and the results
    are stored (and read by the model) in the calls' order."""
    tab = _chat_with_tools(desk, tools)
    _ask(desk, tab, "Sleep twice.")
    _answer(desk, engine, json.dumps([{"name": "slow", "arguments": {"seconds": 4}},
                                      {"name": "slow", "arguments": {"seconds": 1}}]), 1)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    first, second = (c.id for c in _stored(desk, tab)[-1].tool_calls)
    assert tab.approval.call_id == first
    QTest.mouseClick(tab.approval.allow_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: [c.state for c in calls_shown(tab.view)] == [RUNNING, APPROVAL])
    assert tab.approval.isVisible() and tab.approval.call_id == second, "asked while the first runs"
    QTest.mouseClick(tab.approval.allow_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: [c.state for c in calls_shown(tab.view)] == [RUNNING, RUNNING])
    assert desk.ctx.waiting_on_tools().get(tab.conversation_id) == "running slow and slow"
    desk.qtbot.waitUntil(lambda: [c.state for c in calls_shown(tab.view)] == [RUNNING, DONE], timeout=10_000)
    assert re.match(r"▸ slow · done · \d+\.\d\d s", chip_shown(tab.view, *call_row(tab.view, "slow", 1)))
    assert [m.role for m in _stored(desk, tab)] == ["user", "assistant"], "held until the first's is stored"

    desk.qtbot.waitUntil(lambda: len(engine.requests) == 2, timeout=30_000)
    rows = [m for m in _stored(desk, tab) if m.role == "tool"]
    assert [(m.tool_result.call_id, m.content) for m in rows] == [(first, "slept 4.0 s"), (second, "slept 1.0 s")]
    told = engine.chats[1].messages[-1]["content"]
    assert told.index("slept 4.0 s") < told.index("slept 1.0 s"), "the model reads them in the calls' order"
    assert [(c.state, c.result) for c in calls_shown(tab.view)] == [(DONE, "slept 4.0 s"), (DONE, "slept 1.0 s")]


def test_stop_while_two_calls_run_stores_each_as_stopped_and_a_result_held_between_them(desk, engine, tools):
    tab = _chat_with_tools(desk, tools)
    _ask(desk, tab, "Sleep three times.")
    _answer(desk, engine, json.dumps([{"name": "slow", "arguments": {"seconds": s}} for s in (6, 0.5, 6)]), 1)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    QTest.mouseClick(tab.approval.always_button, Qt.MouseButton.LeftButton)  # the other two run unasked
    desk.qtbot.waitUntil(lambda: [c.state for c in calls_shown(tab.view)] == [RUNNING, DONE, RUNNING],
                         timeout=10_000)
    assert desk.ctx.waiting_on_tools().get(tab.conversation_id) == "running slow and slow"
    QTest.mouseClick(tab.stop_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: not tab.busy and len(_stored(desk, tab)) == 5)
    rows = _stored(desk, tab)[2:]
    assert [(m.content, m.tool_result.cancelled) for m in rows] == \
        [(STOPPED, True), ("slept 0.5 s", False), (STOPPED, True)]
    desk.qtbot.waitUntil(lambda: [c.state for c in calls_shown(tab.view)] == [STOPPED_STATE, DONE, STOPPED_STATE])
    assert len(engine.requests) == 1 and tab.state_label.text() == "stopped before the tool's result"


def test_screenshot_of_a_chat_with_tool_chips(desk, engine, tools, theme):
    """Three calls in three turns: the first chip opened (its arguments and result), the
    second closed, the third waiting for approval with its buttons inside it."""
    from tests.support.gui_app import SCREENSHOTS

    tab = _chat_with_tools(desk, tools, "Sums with a tool")
    desk.controllers.conversations.refresh()
    _ask(desk, tab, "What is 2 + 3, then 5 + 5, then 1 + 1?")
    for n, (a, b) in enumerate(((2, 3), (5, 5), (1, 1)), 1):
        _answer(desk, engine, json.dumps({"name": "add", "arguments": {"a": a, "b": b}}), n)
        desk.qtbot.waitUntil(lambda: tab.approval.isVisible(), timeout=30_000)
        if n < 3:
            QTest.mouseClick(tab.approval.allow_button, Qt.MouseButton.LeftButton)
    row, i = call_row(tab.view, "add")
    _click_chip(desk, tab, row, i)
    desk.qtbot.waitUntil(lambda: chip_shown(tab.view, row, i).startswith("▾ add"))
    tab.view.clearSelection()  # the click selected the reply: drawn as the user left it, focus on Allow
    tab.approval.allow_button.setFocus()
    w = desk.window  # no engine runs on the desk: the loader drawn as it is once the model is ready
    w.model_picker.set_status(ModelStatus(w.model_picker.status.name, READY))
    last = call_row(tab.view, "add", 2)
    desk.qtbot.waitUntil(lambda: chip_rect(tab.view, *last).contains(tab.approval.geometry()))
    desk.qtbot.wait(50)  # the last frame's repaint before the grab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert desk.window.grab().save(str(SCREENSHOTS / f"tool-chip-{theme}.png"))


def test_the_tools_button_turns_a_server_on_for_this_chat_only(desk, engine, tools):
    tab, other = desk.open_chat("with tools"), desk.open_chat("without")
    desk.window.tabs.setCurrentWidget(tab)
    QTest.mouseClick(tab.tools_button, Qt.MouseButton.LeftButton)
    menu = tab.tools_menu
    desk.qtbot.waitUntil(lambda: menu.isVisible())
    server = next(a for a in menu.actions() if a.text().startswith("test · "))
    assert server.text() == "test · ready with 6 tools" and not server.isChecked()
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(server).center())
    desk.qtbot.waitUntil(lambda: tab.tools_button.text() == "Tools (6)")
    assert other.tools_button.text() == "Tools"
    assert tools.chat_servers(tab.conversation_id) == ("test",) and tools.chat_servers(other.conversation_id) == ()
    desk.settled()
    saved = desk.ctx.catalog.get_setting("chat_tools")
    assert saved == {str(tab.conversation_id): ["test"]}, "kept over a restart"


def test_regenerate_after_a_tool_round_answers_from_the_result_again_without_forcing_a_call(desk, engine, tools):
    tab = _chat_with_tools(desk, tools)
    tools.set_chat_required(tab.conversation_id, True)  # the first turn of a reply must call
    _ask(desk, tab, "What is 2 + 3?")
    _answer(desk, engine, ADD_CALL, 1)
    assert engine.chats[0].sampling.grammar is not None
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    QTest.mouseClick(tab.approval.allow_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 2, timeout=30_000)
    _answer(desk, engine, "2 + 3 is 5.", 2)
    desk.qtbot.waitUntil(lambda: not tab.busy and tab.regenerate_button.isEnabled())

    QTest.mouseClick(tab.regenerate_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 3, timeout=10_000)
    again = engine.chats[2]
    assert again.messages == engine.chats[1].messages, "the same prompt: the call and its result in it"
    assert again.sampling.grammar is None, "a turn after a result is not forced to call again"
    _answer(desk, engine, "Five.", 3)
    desk.qtbot.waitUntil(lambda: not tab.busy and tab.model.views()[-1].text == "Five.")
    assert [m.role for m in _stored(desk, tab)] == ["user", "assistant", "tool", "assistant"]
    assert tab.approval.isHidden()


def test_a_failing_tool_and_a_cut_output_are_said_on_their_chips(desk, engine, tools):
    from ui.services.mcp_tools import ToolSettings

    tools.set_settings(ToolSettings(output_cap=100, timeout_s=20, max_rounds=5))
    tab = _chat_with_tools(desk, tools)
    _ask(desk, tab, "Fail, then make it big.")
    _answer(desk, engine, '{"name": "fail", "arguments": {}}', 1)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    QTest.mouseClick(tab.approval.always_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 2, timeout=30_000)
    assert "this tool always fails" in engine.chats[1].messages[-1]["content"]  # the model reads the error
    _answer(desk, engine, '{"name": "big", "arguments": {"characters": 5000}}', 2)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    QTest.mouseClick(tab.approval.allow_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 3, timeout=30_000)
    chips = calls_shown(tab.view)
    assert [(c.name, c.state) for c in chips] == [("fail", FAILED), ("big", DONE)]
    assert chips[0].took.endswith(" s") and "this tool always fails" in chips[0].result
    assert chips[1].note == "4,900 characters cut"
    row, i = call_row(tab.view, "fail")
    _click_chip(desk, tab, row, i)  # opened: the error said as one, in plain text
    desk.qtbot.waitUntil(lambda: chip_shown(tab.view, row, i).startswith("▾ fail · failed · "))
    assert "\nError\n" in chip_shown(tab.view, row, i) and "Result" not in chip_shown(tab.view, row, i)
    assert "[output cut: 4900 of 5000 characters left out]" in engine.chats[2].messages[-1]["content"]
    assert tab.busy and not tab.approval.isVisible()  # the third turn is being written: the chat goes on


def test_the_next_turn_shows_the_call_as_the_model_wrote_it(desk, engine, tools):
    """Storage keeps the calls, not their text; the follow-up's prompt still holds the call
    token for token as the model wrote it (json.dumps would space it otherwise, and the
    engine would compute it again)."""
    written = '{ "name": "add", "arguments": { "a": 2, "b": 3 } }'
    tab = _chat_with_tools(desk, tools)
    _ask(desk, tab, "What is 2 + 3?")
    _answer(desk, engine, written, 1)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    QTest.mouseClick(tab.approval.allow_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 2, timeout=30_000)
    assert engine.chats[1].messages[-2] == {"role": "assistant", "content": written}
    assert _stored(desk, tab)[1].content == ""  # what storage keeps: the calls alone


QWEN_TEMPLATE = Path(__file__).parents[2] / "fixtures" / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"


def test_a_model_with_its_own_tool_format_gets_the_tools_through_its_template(desk, engine, tools):
    """A Qwen-style model (its real template, from llama.cpp's repository): the tools go to
    the template's `tools`, not the system prompt; its <tool_call> reply is read as the call;
    the next turn carries the call and the result in OpenAI's shape for the template; a
    required call is forced with Hermes markup."""
    engine.template = QWEN_TEMPLATE.read_text()
    tab = _chat_with_tools(desk, tools)
    tools.set_chat_required(tab.conversation_id, True)
    _ask(desk, tab, "What is 2 + 3?")
    _answer(desk, engine, '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>', 1)
    first = engine.chats[0]
    assert first.tools and {t["function"]["name"] for t in first.tools} >= {"add", "slow"}
    assert all("You can call these functions" not in str(m.get("content")) for m in first.messages)
    assert "<tool_call>" in first.sampling.grammar  # the forced call in the model's own markup
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    QTest.mouseClick(tab.approval.allow_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 2, timeout=30_000)
    second = engine.chats[1]
    call, result = second.messages[-2], second.messages[-1]
    assert call["role"] == "assistant" and call["tool_calls"][0]["function"] == {"name": "add",
                                                                                 "arguments": {"a": 2, "b": 3}}
    assert result["role"] == "tool" and result["content"] == "5"
    assert second.tools == first.tools and second.sampling.grammar is None
    _answer(desk, engine, "2 + 3 is 5.", 2)
    desk.qtbot.waitUntil(lambda: not tab.busy and tab.model.views()[-1].text == "2 + 3 is 5.")


def test_a_qwen_reply_with_prose_before_its_call_shows_the_prose_above_the_chip(desk, engine, tools):
    """Issue 38: "Let me add them." then <tool_call>: the prose streams into the bubble, no
    piece of the tag ever shows, and the call's chip comes under the prose; storage keeps
    both (the reopened chat shows them again) and the next turn's prompt carries both."""
    engine.template = QWEN_TEMPLATE.read_text()
    tab = _chat_with_tools(desk, tools)
    _ask(desk, tab, "What is 2 + 3?")
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 1, timeout=10_000)
    request_id = engine.requests[-1]
    engine.write(request_id, "Let me add them.\n")
    desk.qtbot.waitUntil(lambda: tab.model.views()[-1].text == "Let me add them.\n")
    engine.write(request_id, "<tool_")
    desk.qtbot.wait(100)  # frames go by: the tag's beginning is held, never drawn to be taken back
    assert "<" not in tab.model.views()[-1].text and tab.state_label.text() == "calling a tool…"
    engine.write(request_id, 'call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>')
    engine.end(request_id)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())
    row, i = call_row(tab.view, "add")
    assert tab.model.view(row).text == "Let me add them." and [c.name for c in calls_shown(tab.view)] == ["add"]
    assert all("<tool" not in v.text for v in tab.model.views())
    reply = _stored(desk, tab)[-1]
    assert (reply.content, [c.name for c in reply.tool_calls]) == ("Let me add them.", ["add"])

    desk.window.close_tab_of(tab.conversation_id)  # reopened: the bubble rebuilt from storage
    desk.controllers.conversations.open_conversation(reply.conversation_id)
    desk.qtbot.waitUntil(lambda: desk.window.tab_for(reply.conversation_id) is not None)
    tab = desk.window.tab_for(reply.conversation_id)
    desk.qtbot.waitUntil(lambda: tab.approval.isVisible())  # the call is asked about again
    row, i = call_row(tab.view, "add")
    assert tab.model.view(row).text == "Let me add them." and chip_shown(tab.view, row, i).startswith("▾ add")

    QTest.mouseClick(tab.approval.allow_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 2, timeout=30_000)
    call = engine.chats[1].messages[-2]
    assert call["content"] == "Let me add them." and call["tool_calls"][0]["function"]["name"] == "add"


def test_one_tool_of_a_server_turned_off_in_the_tools_menu_is_not_offered(desk, engine, tools):
    tab = _chat_with_tools(desk, tools)
    QTest.mouseClick(tab.tools_button, Qt.MouseButton.LeftButton)
    menu = tab.tools_menu
    desk.qtbot.waitUntil(lambda: menu.isVisible())
    listed = {a.text().strip(): a for a in menu.actions() if a.text().startswith("    ")}
    assert set(listed) == {"add", "slow", "big", "wait", "fail", "picture"}
    assert all(a.isChecked() for a in listed.values())
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(listed["slow"]).center())
    desk.qtbot.waitUntil(lambda: tab.tools_button.text() == "Tools (5)")
    _ask(desk, tab, "Sleep.")
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 1, timeout=10_000)
    described = engine.chats[0].messages[0]["content"]
    assert '"name": "add"' in described and '"name": "slow"' not in described
    desk.settled()
    assert desk.ctx.catalog.get_setting("chat_tools_off") == {str(tab.conversation_id): ["test/slow"]}


def test_the_chats_tool_choices_come_back_at_the_next_start(desk, engine, tools, qtbot, tmp_path):
    tab = _chat_with_tools(desk, tools)
    tools.set_chat_required(tab.conversation_id, True)
    tools.set_tool_on(tab.conversation_id, next(t for t in tools.tools() if t.name == "big"), False)
    desk.settled()
    tools.shutdown()
    again = Desk(qtbot, tmp_path)  # the next start, on the same data
    try:
        again.ctx.tools.restore()
        qtbot.waitUntil(lambda: len(again.ctx.tools.chat_tools(tab.conversation_id)) == 5, timeout=60_000)
        assert "big" not in {t.name for t in again.ctx.tools.chat_tools(tab.conversation_id)}
        assert again.ctx.tools.chat_servers(tab.conversation_id) == ("test",)
        assert again.ctx.tools.chat_required(tab.conversation_id)
    finally:
        again.ctx.tools.shutdown()
        again.close()


def test_the_tools_menu_turns_the_web_tools_on_and_a_reply_is_offered_them(desk, engine):
    tab = desk.open_chat("web")
    desk.window.tabs.setCurrentWidget(tab)
    QTest.mouseClick(tab.tools_button, Qt.MouseButton.LeftButton)
    menu = tab.tools_menu
    desk.qtbot.waitUntil(lambda: menu.isVisible())
    web = next(a for a in menu.actions() if a.text().startswith("Web · "))
    assert not web.isChecked()
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(web).center())
    desk.qtbot.waitUntil(lambda: tab.tools_button.text() == "Tools (2)")
    menu.close()
    _ask(desk, tab, "Look it up.")
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 1, timeout=10_000)
    described = engine.chats[0].messages[0]["content"]
    assert '"name": "fetch"' in described and '"name": "web_search"' in described


def test_the_web_tools_settings_are_kept(desk, engine):
    desk.ctx.tools.set_web_settings(" http://127.0.0.1:8888 ", allow_private=True)
    desk.settled()
    assert desk.ctx.catalog.get_setting("web_tools") == {"searxng_url": "http://127.0.0.1:8888", "allow_private": True}


def test_the_tools_menu_opens_above_its_button_inside_the_window(desk, engine, tools):
    """Issue 39, defect 13: dropped below the button at the window's bottom, the menu with a
    server's tools listed ran past the window."""
    tab = _chat_with_tools(desk, tools)
    QTest.mouseClick(tab.tools_button, Qt.MouseButton.LeftButton)
    menu = tab.tools_menu
    desk.qtbot.waitUntil(lambda: menu.isVisible())
    assert len([a for a in menu.actions() if a.text().startswith("    ")]) == 6  # the server's tools listed
    button_top = tab.tools_button.mapToGlobal(QPoint(0, 0)).y()
    desk.qtbot.waitUntil(lambda: menu.geometry().bottom() < button_top)
    window = desk.window.frameGeometry()
    assert window.top() <= menu.geometry().top() and menu.geometry().bottom() <= window.bottom()
    menu.close()
