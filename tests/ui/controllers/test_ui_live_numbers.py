"""One source for a reply's live numbers, which every view follows (issue 27, defect 6): the
message's header and the tab's state line, the status bar, a comparison's composer; and
"1 token", not "1 tokens" (defect 10). No model: a scripted engine answers."""

from __future__ import annotations

from PySide6.QtCore import Qt

from inference.outputs import Delta, FinishReason, RequestStats
from tests.support.desk import Desk, ScriptedEngine


def _open_chat(desk: Desk):
    conv = desk.repo.create_conversation(title="numbers")
    desk.controllers.conversations.open_conversation(conv.id)
    desk.qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    return desk.window.tab_for(conv.id)


def _send(desk: Desk, engine: ScriptedEngine, composer, text: str, replies: int = 1) -> list[str]:
    before = len(engine.requests)
    desk.qtbot.keyClicks(composer, text)
    desk.qtbot.keyClick(composer, Qt.Key.Key_Return)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == before + replies)
    return engine.requests[before:]


def _reply_header(tab) -> str:
    return tab.model.view(tab.model.rowCount() - 1).meta


def test_a_reopened_writing_chat_shows_its_count_once_and_current(desk, engine, qtbot):
    tab = _open_chat(desk)
    conv_id = tab.conversation_id
    (request,) = _send(desk, engine, tab.composer, "Count.")
    engine.write(request, "one two ", tokens=79)
    reply_id = desk.streams.stream_for(conv_id).message_id
    # Saved as a checkpoint would save it, then the tab closed and opened again.
    desk.repo.checkpoint(reply_id, "one two ", completion_tokens=79)
    desk.window.close_tab_of(conv_id)
    desk.window.open_requested.emit(conv_id)
    qtbot.waitUntil(lambda: desk.window.tab_for(conv_id) is not None)
    tab = desk.window.tab_for(conv_id)
    engine.write(request, "three ", tokens=316)
    qtbot.waitUntil(lambda: tab.state_label.text().startswith("writing… 395 tokens"))
    # Each number once: the state line counts, the header of the reply being written does not
    # (it said "79 tokens", the checkpoint's, while the state line said 395).
    assert "tokens" not in _reply_header(tab)
    stats = RequestStats(prompt_tokens=9, cached_tokens=0, generated_tokens=395, queue_s=0.0, ttft_s=0.2,
                         decode_tok_s=40.0, itl_p50_s=None, itl_p95_s=None, total_s=8.0)
    desk.streams.on_delta(Delta.finished_with(request, FinishReason.STOP, stats=stats))
    qtbot.waitUntil(lambda: "395 tokens" in _reply_header(tab))  # the final numbers, on the reply
    assert "tokens" not in tab.state_label.text()


def test_one_token_is_one_token(desk, engine, qtbot):
    tab = _open_chat(desk)
    (request,) = _send(desk, engine, tab.composer, "One word.")
    engine.write(request, "Yes", tokens=1)
    qtbot.waitUntil(lambda: tab.state_label.text().startswith("writing… 1 token"))
    assert "1 tokens" not in tab.state_label.text()


def test_the_status_bar_counts_the_replies_being_written(desk, engine, qtbot):
    tab = _open_chat(desk)
    line = desk.window.status.engine_label.text
    (request,) = _send(desk, engine, tab.composer, "Hello?")
    engine.write(request)
    qtbot.waitUntil(lambda: "1 writing" in line())
    engine.end(request, FinishReason.STOP)
    qtbot.waitUntil(lambda: "writing" not in line())
    compare = desk.window.open_comparisons()
    assert compare == []
    desk.controllers.compare.new_comparison()
    qtbot.waitUntil(lambda: [len(c.panes()) for c in desk.window.open_comparisons()] == [2])
    view = desk.window.open_comparisons()[0]
    requests = _send(desk, engine, view.composer, "Both of you?", replies=2)
    for r in requests:
        engine.write(r)
    qtbot.waitUntil(lambda: "2 writing" in line())
    for r in requests:
        engine.end(r, FinishReason.STOP)
    qtbot.waitUntil(lambda: "writing" not in line())
    qtbot.waitUntil(lambda: not view.busy())
    assert "Writing" not in view.composer.placeholderText()
