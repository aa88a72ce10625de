"""A reasoning model's reply in the chat view (issue 27): its <think> block shown apart as
"Thought for N s" (open and live while the model thinks, closed once the reply finished, a
click opens it), counted apart on the reply's header, stored whole, and left out of the next
turn's prompt. The tiny test models do not think: a scripted engine writes a recorded Qwen3
reply, delta by delta."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtTest import QTest

from inference.outputs import Delta, FinishReason, RequestStats
from tests.app.chats.test_reasoning import QWEN3
from tests.support.gui_app import SCREENSHOTS
from tests.support.message_rows import row_document, view_point
from ui.widgets.chat.reply_document import reasoning_header

REASONING = "Okay, the user is asking what 2+2 is."


def _open_chat(desk):
    conv = desk.repo.create_conversation(title="thinking")
    desk.controllers.conversations.open_conversation(conv.id)
    desk.qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    return desk.window.tab_for(conv.id)


def _send(desk, engine, chats, tab, text):
    before = len(chats)
    desk.qtbot.keyClicks(tab.composer, text)
    desk.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    desk.qtbot.waitUntil(lambda: len(chats) == before + 1)
    return chats[-1]


def _recording(engine):
    chats = []
    stream = engine.stream

    def record(chat, sink):
        chats.append(chat)
        return stream(chat, sink)

    engine.stream = record
    return chats


def _document(tab, row):
    """The document the delegate lays the row out with, as it paints it."""
    return row_document(tab.view, row)


def _click_thought_line(tab, row) -> None:
    line = reasoning_header(_document(tab, row))
    at = view_point(tab.view, row, QPointF(line.left() + 20, line.center().y()))
    tab.view.window().activateWindow()
    QTest.mouseClick(tab.view.viewport(), Qt.MouseButton.LeftButton, pos=at)


def _shown_text(tab, row) -> str:
    return _document(tab, row).toPlainText()


def test_a_reasoning_reply_thinks_live_then_folds_and_stays_out_of_the_next_prompt(desk, engine, qtbot):
    chats = _recording(engine)
    tab = _open_chat(desk)
    desk.window.resize(900, 600)
    chat = _send(desk, engine, chats, tab, "What is 2+2?")
    row = tab.model.rowCount() - 1
    for delta in QWEN3[:10]:  # still thinking
        engine.write(chat.request_id, delta)
    qtbot.waitUntil(lambda: "Thinking…" in _shown_text(tab, row))
    shown = _shown_text(tab, row)
    assert "Okay, the user is asking what" in shown and "<think>" not in shown  # live, without the marker
    for delta in QWEN3[10:]:
        engine.write(chat.request_id, delta)
    stats = RequestStats(prompt_tokens=12, cached_tokens=0, generated_tokens=27, queue_s=0.0, ttft_s=0.1,
                         decode_tok_s=50.0, itl_p50_s=None, itl_p95_s=None, total_s=0.6)
    desk.streams.on_delta(Delta.finished_with(chat.request_id, FinishReason.STOP, stats=stats))
    qtbot.waitUntil(lambda: tab.model.view(row).status == "complete")
    view = tab.model.view(row)
    assert view.thought_s is not None
    # Finished: folded to its line; the answer below it; counted apart on the header.
    shown = _shown_text(tab, row)
    assert shown.startswith("▸ Thought for") and REASONING not in shown and "2 + 2 = 4." in shown
    assert "27 tokens (18 reasoning)" in view.meta
    # Stored whole, markers and all: the reasoning stays with the message.
    qtbot.waitUntil(lambda: desk.repo.active_path(tab.conversation_id).messages[-1].content == "".join(QWEN3))
    # A click on the line opens it, and the row grows; a second click closes it.
    folded = tab.view.visualRect(tab.model.index(row)).height()
    _click_thought_line(tab, row)
    qtbot.waitUntil(lambda: REASONING in _shown_text(tab, row))
    assert _shown_text(tab, row).startswith("▾ Thought for")
    qtbot.waitUntil(lambda: tab.view.visualRect(tab.model.index(row)).height() > folded)
    _click_thought_line(tab, row)
    qtbot.waitUntil(lambda: REASONING not in _shown_text(tab, row))
    # The next turn's prompt carries the answer alone.
    follow = _send(desk, engine, chats, tab, "And 3+3?")
    assert [m["content"] for m in follow.messages if m["role"] == "assistant"] == ["2 + 2 = **4**."]


def test_a_reply_without_reasoning_has_no_thought_line(desk, engine, qtbot):
    chats = _recording(engine)
    tab = _open_chat(desk)
    chat = _send(desk, engine, chats, tab, "Hi")
    engine.write(chat.request_id, "Hello! How can I help?")
    engine.end(chat.request_id)
    row = tab.model.rowCount() - 1
    qtbot.waitUntil(lambda: tab.model.view(row).status == "complete")
    assert _shown_text(tab, row).strip() == "Hello! How can I help?"
    assert reasoning_header(_document(tab, row)) is None
    assert "reasoning" not in tab.model.view(row).meta


STORED = ("<think>\nThe user wants the derivative of x² sin x. That is a product, so the product rule: "
          "(fg)' = f'g + fg'. With f = x², f' = 2x; g = sin x, g' = cos x.\n\n"
          "So the derivative is 2x sin x + x² cos x. Let me double-check the signs: both terms "
          "are positive, since (sin x)' = cos x.\n</think>\n\n"
          "By the **product rule**:\n\n- d/dx x² = 2x\n- d/dx sin x = cos x\n\n"
          "so the derivative of x² sin x is **2x sin x + x² cos x**.")


def test_a_saved_reasoning_reply_reopens_folded_with_its_estimated_time(desk, qtbot):
    conv = desk.repo.create_conversation(title="derivative")
    desk.repo.add_message(conv.id, "user", "What is the derivative of x² sin x?")
    reply = desk.repo.start_reply(conv.id, model="Qwen3-0.6B")
    desk.repo.finish_reply(reply.id, STORED, completion_tokens=180, ttft_s=0.21, tokens_per_s=30.0)
    desk.window.resize(900, 600)
    desk.controllers.conversations.open_conversation(conv.id)
    qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None
                    and desk.window.tab_for(conv.id).model.rowCount() == 2)
    tab = desk.window.tab_for(conv.id)
    # Not stored: estimated from the stored speed, the reasoning's share of the text.
    assert tab.model.view(1).thought_s == pytest.approx(0.66 * 180 / 30, abs=0.5)
    assert _shown_text(tab, 1).startswith("▸ Thought for 4 s") and "product rule: " not in _shown_text(tab, 1)
    _click_thought_line(tab, 1)
    qtbot.waitUntil(lambda: "product rule: (fg)" in _shown_text(tab, 1))
    qtbot.waitUntil(lambda: tab.view.visualRect(tab.model.index(1)).height() > 200)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert desk.window.grab().save(str(SCREENSHOTS / "reasoning-block.png"))
