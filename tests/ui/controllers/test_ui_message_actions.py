"""The actions on the message under the mouse (issue 27, "Message actions on hover"): the bar
shows on hovering a bubble; Copy, Edit (a question: a new branch and a new reply; a reply: a
sibling, nothing generated) with its banner and Cancel, Delete (a leaf at once, a message with
replies after a confirmation), Regenerate beside an earlier reply, Branch into a new chat, and
Continue on a reply cut at the token limit. A scripted engine answers; no model."""

from __future__ import annotations

import itertools

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QApplication, QMessageBox

from inference.outputs import FinishReason
from tests.support.gui_app import SCREENSHOTS


def _open(desk, *texts: str, title: str = "actions"):
    """A chat of alternating questions and answers, opened in its tab."""
    conv = desk.repo.create_conversation(title=title)
    for i, text in enumerate(texts):
        desk.repo.add_message(conv.id, "user" if i % 2 == 0 else "assistant", text)
    desk.controllers.conversations.open_conversation(conv.id)
    desk.qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None
                         and desk.window.tab_for(conv.id).model.rowCount() == len(texts))
    tab = desk.window.tab_for(conv.id)
    desk.qtbot.waitUntil(tab.view.viewport().isVisible)
    return tab


_nudge = itertools.count()  # a move to where the mouse already is may send no event


def _hover(qtbot, tab, row: int) -> None:
    """The mouse over a bubble's text (not on its header), and the bar on that bubble."""
    rect = tab.view.visualRect(tab.model.index(row))
    qtbot.mouseMove(tab.view.viewport(), QPoint(rect.center().x() + next(_nudge) % 5 * 3, rect.top() + 40))
    qtbot.waitUntil(lambda: tab.actions.isVisible() and tab.actions.row == row)


def _shown(tab) -> list[str]:
    return [name for name, button in tab.actions.buttons.items() if button.isVisibleTo(tab.actions)]


def _click(qtbot, tab, name: str) -> None:
    button = tab.actions.buttons[name]
    assert button.isVisibleTo(tab.actions), f"{name} is not on the bar: {_shown(tab)}"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def _stored(desk, tab) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in desk.repo.active_path(tab.conversation_id).messages]


def test_hovering_a_message_shows_its_actions_and_copy_copies_its_text(desk, engine, qtbot):
    tab = _open(desk, "What is a hash map?", "A table of **buckets** indexed by a hash.")
    _hover(qtbot, tab, 1)
    assert _shown(tab) == ["copy", "edit", "delete", "regenerate", "branch"]  # no Continue: not cut
    bubble = tab.view.visualRect(tab.model.index(1))
    bar = tab.actions.geometry()
    assert bar.right() < bubble.right() and bubble.bottom() - bar.height() <= bar.top()  # on its bottom edge
    for button in tab.actions.buttons.values():  # a row of small icons, the word in the tooltip
        assert not button.icon().isNull() and button.toolButtonStyle() == Qt.ToolButtonStyle.ToolButtonIconOnly
        assert button.toolTip().startswith(button.text() + ": ") and button.accessibleName() == button.text()
    assert bar.width() < 6 * 40  # icons, not words
    QApplication.clipboard().clear()
    _click(qtbot, tab, "copy")
    assert QApplication.clipboard().text() == "A table of **buckets** indexed by a hash."
    assert tab.actions.buttons["copy"].text() == "Copied ✓"
    assert tab.actions.buttons["copy"].toolButtonStyle() == Qt.ToolButtonStyle.ToolButtonTextBesideIcon
    _hover(qtbot, tab, 0)  # a question: nothing to regenerate; the label is Copy again
    assert _shown(tab) == ["copy", "edit", "delete", "branch"]
    assert tab.actions.buttons["copy"].text() == "Copy"
    _click(qtbot, tab, "copy")
    assert QApplication.clipboard().text() == "What is a hash map?"
    qtbot.mouseMove(tab.view.viewport(), QPoint(5, tab.view.viewport().height() - 3))  # below the last bubble
    qtbot.waitUntil(lambda: not tab.actions.isVisible())


def test_editing_a_question_shows_a_banner_cancel_keeps_the_draft_and_sending_branches(desk, engine, qtbot):
    tab = _open(desk, "Name a colour.", "Blue.")
    qtbot.keyClicks(tab.composer, "half typed")
    _hover(qtbot, tab, 0)
    _click(qtbot, tab, "edit")
    assert tab.edit_banner.isVisible() and tab.edit_banner.label.text().startswith("Editing a message")
    assert tab.composer.toPlainText() == "Name a colour."
    qtbot.mouseClick(tab.edit_banner.cancel_button, Qt.MouseButton.LeftButton)
    assert not tab.edit_banner.isVisible() and tab.composer.toPlainText() == "half typed"
    _hover(qtbot, tab, 0)
    _click(qtbot, tab, "edit")
    qtbot.keyClick(tab.composer, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)  # select all, typed over
    qtbot.keyClicks(tab.composer, "Name a fruit.")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(engine.chats) == 1)
    assert not tab.edit_banner.isVisible()
    assert engine.chats[0].messages == ({"role": "user", "content": "Name a fruit."},)
    engine.write(engine.requests[0], "Apple.")
    engine.end(engine.requests[0])
    qtbot.waitUntil(lambda: _stored(desk, tab) == [("user", "Name a fruit."), ("assistant", "Apple.")])
    first = desk.repo.active_path(tab.conversation_id).messages[0]
    assert len(desk.repo.siblings(first.id)) == 2  # the old question and its answer stay a branch


def test_editing_a_reply_saves_it_as_a_new_branch_and_generates_nothing(desk, engine, qtbot):
    tab = _open(desk, "Name a colour.", "Bleu.")
    _hover(qtbot, tab, 1)
    _click(qtbot, tab, "edit")
    assert tab.edit_banner.isVisible() and tab.edit_banner.label.text().startswith("Editing a reply")
    qtbot.keyClick(tab.composer, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)  # select all, typed over
    qtbot.keyClicks(tab.composer, "Blue.")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: _stored(desk, tab) == [("user", "Name a colour."), ("assistant", "Blue.")])
    qtbot.waitUntil(lambda: tab.model.view(1).text == "Blue." and tab.model.view(1).branch == (2, 2))
    assert engine.chats == []  # no reply was asked for
    desk.settled()
    assert engine.chats == []


def test_delete_takes_a_leaf_at_once_and_a_message_with_replies_after_a_confirmation(desk, engine, qtbot):
    tab = _open(desk, "q1", "a1", "q2", "a2")
    _hover(qtbot, tab, 3)
    _click(qtbot, tab, "delete")  # a leaf: no question asked
    qtbot.waitUntil(lambda: tab.model.rowCount() == 3)
    assert _stored(desk, tab) == [("user", "q1"), ("assistant", "a1"), ("user", "q2")]
    assert tab.delete_box is None
    _hover(qtbot, tab, 0)
    _click(qtbot, tab, "delete")
    qtbot.waitUntil(lambda: tab.delete_box is not None and tab.delete_box.isVisible())
    assert "the 2 messages after it" in tab.delete_box.text()
    qtbot.mouseClick(tab.delete_box.button(QMessageBox.StandardButton.Cancel), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tab.delete_box is None)
    desk.settled()
    assert len(_stored(desk, tab)) == 3  # cancelled: nothing went
    _hover(qtbot, tab, 0)
    _click(qtbot, tab, "delete")
    qtbot.waitUntil(lambda: tab.delete_box is not None and tab.delete_box.isVisible())
    delete = next(b for b in tab.delete_box.buttons()
                  if tab.delete_box.buttonRole(b) == QMessageBox.ButtonRole.DestructiveRole)
    qtbot.mouseClick(delete, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tab.model.rowCount() == 0)
    assert _stored(desk, tab) == []
    assert engine.chats == []


def test_regenerate_on_an_earlier_reply_answers_its_question_again_in_a_new_branch(desk, engine, qtbot):
    tab = _open(desk, "q1", "a1", "q2", "a2")
    _hover(qtbot, tab, 1)
    _click(qtbot, tab, "regenerate")
    qtbot.waitUntil(lambda: len(engine.chats) == 1)
    assert engine.chats[0].messages == ({"role": "user", "content": "q1"},)  # the path up to that question
    engine.write(engine.requests[0], "a1 again")
    engine.end(engine.requests[0])
    qtbot.waitUntil(lambda: _stored(desk, tab) == [("user", "q1"), ("assistant", "a1 again")])
    qtbot.waitUntil(lambda: tab.model.rowCount() == 2 and tab.model.view(1).branch == (2, 2))


def test_branch_into_a_new_chat_opens_the_path_up_to_that_message_in_a_new_tab(desk, engine, qtbot):
    tab = _open(desk, "q1", "a1", "q2", "a2", title="source")
    tabs = desk.window.tabs
    _hover(qtbot, tab, 1)
    _click(qtbot, tab, "branch")
    qtbot.waitUntil(lambda: tabs.count() == 2 and tabs.currentWidget() is not tab)
    new = tabs.currentWidget()
    qtbot.waitUntil(lambda: [v.text for v in new.model.views()] == ["q1", "a1"])
    assert new.conversation_id != tab.conversation_id and new.title == "source (branch)"
    assert _stored(desk, new) == [("user", "q1"), ("assistant", "a1")]
    assert [m for _r, m in _stored(desk, tab)] == ["q1", "a1", "q2", "a2"]  # the source is untouched


def _writing_a_story(desk, engine, qtbot):
    """A chat whose third message is being answered: "Once upon a time" so far (row 3)."""
    tab = _open(desk, "q1", "a1")
    qtbot.keyClicks(tab.composer, "Tell me a long story.")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(engine.chats) == 1)
    engine.write(engine.requests[0], "Once upon a time")
    qtbot.waitUntil(lambda: tab.model.rowCount() == 4 and "Once" in tab.model.view(3).text)
    return tab


def _continue_the_story(qtbot, tab, engine) -> None:
    """Continue on the story's bubble asks the engine to go on from its text."""
    _click(qtbot, tab, "continue")
    qtbot.waitUntil(lambda: len(engine.chats) == 2)
    assert engine.chats[1].continue_final
    assert engine.chats[1].messages[-1] == {"role": "assistant", "content": "Once upon a time"}


def test_a_reply_cut_at_the_token_limit_offers_continue_on_its_bubble(desk, engine, qtbot):
    tab = _writing_a_story(desk, engine, qtbot)
    _hover(qtbot, tab, 1)
    assert _shown(tab) == ["copy"]  # while a reply is written the branch on screen is changing
    engine.end(engine.requests[0], FinishReason.LENGTH)
    qtbot.waitUntil(lambda: tab.continuable == tab.model.view(3).message_id)
    _hover(qtbot, tab, 1)
    assert "continue" not in _shown(tab)  # only the reply that was cut
    _hover(qtbot, tab, 3)
    assert _shown(tab)[-1] == "continue"
    _continue_the_story(qtbot, tab, engine)


def test_a_reply_the_user_stopped_offers_continue_on_its_bubble(desk, engine, qtbot):
    """Issue 39's look: a stopped reply offers Continue (it had nothing but Copy and Branch)."""
    tab = _writing_a_story(desk, engine, qtbot)
    qtbot.mouseClick(tab.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tab.model.view(3).status == "stopped")
    qtbot.waitUntil(lambda: tab.continuable == tab.model.view(3).message_id)
    assert tab.panel.continue_button.isVisibleTo(tab.panel)
    _hover(qtbot, tab, 3)
    assert _shown(tab)[-1] == "continue"
    _continue_the_story(qtbot, tab, engine)


def test_screenshot_of_the_hover_actions(desk, engine, qtbot, theme):
    desk.window.resize(900, 600)
    tab = _open(desk, "How do I reverse a list in Python?",
                "Use slicing or the `reverse()` method:\n\n```python\nitems = [1, 2, 3]\nitems.reverse()\n```\n\n"
                "`items[::-1]` makes a reversed **copy** and leaves the list as it was.",
                "And a string?", "Strings have no `reverse()`: use `text[::-1]`.", title="Reversing")
    desk.controllers.conversations.refresh()  # the chat in the sidebar too
    _hover(qtbot, tab, 1)
    qtbot.mouseMove(tab.actions.buttons["regenerate"])  # its hover state and tooltip target
    qtbot.waitUntil(lambda: tab.actions.buttons["regenerate"].underMouse())
    qtbot.wait(50)  # let the hover repaint settle before the grab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert desk.window.grab().save(str(SCREENSHOTS / f"hover-actions-{theme}.png"))
    assert tab.actions.isVisible() and tab.actions.row == 1


def test_a_chat_with_tool_turns_goes_to_the_model_as_plain_turns(desk):
    """A chat the terminal's --mcp wrote (an assistant call, a tool's result) continued in the
    app: the template gets no "tool" role and no empty assistant turn."""
    from storage import ToolCallRecord, ToolResultRecord
    from ui.services.conversation_actions import ConversationActions

    repo = desk.repo
    conv = repo.create_conversation(title="tools").id
    repo.add_message(conv, "user", "What time is it?")
    repo.add_message(conv, "assistant", "", tool_calls=[ToolCallRecord("c1", "now", "{}")])
    repo.add_message(conv, "tool", "17:00", tool_result=ToolResultRecord("c1", "now"))
    repo.add_message(conv, "assistant", "It is five.")
    repo.add_message(conv, "user", "Thanks")
    reply = repo.start_reply(conv, parent_id=repo.active_path(conv).messages[-1].id)
    prompt = ConversationActions(desk.ctx).prompt_for(repo.active_path(conv), reply)
    roles = [m["role"] for m in prompt.messages]
    assert "tool" not in roles
    assert all(m["content"] for m in prompt.messages)
    assert any("17:00" in m["content"] for m in prompt.messages) and any('"now"' in m["content"]
                                                                       for m in prompt.messages)
