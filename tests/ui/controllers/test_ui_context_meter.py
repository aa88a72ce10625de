"""The context meter in a chat tab's top line (issue 27, "Context use"): the last reply's
prompt and reply against the engine's context, and once the chat is longer than the context
what its overflow policy does. A scripted engine answers with the stats a real one sends."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from PySide6.QtCore import Qt

from app.engines.protocol import EngineState, EngineStatus
from inference.outputs import Delta, FinishReason, ModelInfo, RequestStats
from tests.support.desk import Desk, scripted_engine
from tests.support.gui_app import SCREENSHOTS


def _stats(prompt: int, generated: int, dropped: int = 0) -> RequestStats:
    return RequestStats(prompt_tokens=prompt, cached_tokens=0, generated_tokens=generated, queue_s=0.0,
                        ttft_s=0.1, decode_tok_s=40.0, itl_p50_s=None, itl_p95_s=None, total_s=1.0,
                        messages_dropped=(1, dropped) if dropped else (0, 0))


def _chat(desk, engine, n_ctx: int = 512, sampling: dict | None = None):
    engine.state = SimpleNamespace(info=SimpleNamespace(n_ctx=n_ctx))  # what a loaded engine reports
    conv = desk.repo.create_conversation(title="long chat", sampling=sampling)
    desk.controllers.conversations.open_conversation(conv.id)
    desk.qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    return desk.window.tab_for(conv.id)


def _reply(desk, engine, tab, question: str, stats: RequestStats) -> None:
    before = len(engine.chats)
    desk.qtbot.keyClicks(tab.composer, question)
    desk.qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    desk.qtbot.waitUntil(lambda: len(engine.chats) == before + 1)
    request = engine.requests[-1]
    engine.write(request, "An answer. " * 8, tokens=stats.generated_tokens)
    desk.streams.on_delta(Delta.finished_with(request, FinishReason.STOP, stats=stats))
    desk.qtbot.waitUntil(lambda: tab.model.views()[-1].status == "complete")


def test_the_meter_shows_the_last_replys_share_of_the_context(desk, engine, qtbot):
    tab = _chat(desk, engine)
    meter = tab.context_meter
    assert not meter.isVisible()  # nothing said yet
    _reply(desk, engine, tab, "Hello", _stats(prompt=300, generated=100))
    qtbot.waitUntil(lambda: meter.isVisible() and meter.label.text() == "Context 400 / 512")
    assert meter.bar.value() == 400 and meter.bar.maximum() == 512
    assert "400 of 512 context tokens" in meter.toolTip() and "78%" in meter.toolTip()


def test_a_full_context_says_the_oldest_turns_leave_the_models_view(desk, engine, qtbot):
    tab = _chat(desk, engine)
    meter = tab.context_meter
    _reply(desk, engine, tab, "Go on", _stats(prompt=470, generated=30, dropped=12))
    qtbot.waitUntil(lambda: "full: the oldest turns leave the model's view" in meter.label.text())
    assert meter.label.text().startswith("Context 500 / 512")
    assert "did not see 12 earlier messages" in meter.toolTip()
    assert tab.panel.numbers["seen"].text().startswith("all but 12 earlier messages")  # the panel agrees
    desk.controllers.conversations.refresh()
    desk.window.resize(900, 600)
    qtbot.waitUntil(lambda: desk.window.size().width() == 900)
    qtbot.waitUntil(lambda: tab.context_meter.label.width() < tab.context_meter.label.sizeHint().width())
    assert desk.window.size().height() == 600  # the meter gives way: the window still fits 900x600
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert desk.window.grab().save(str(SCREENSHOTS / "context-meter.png"))


def test_a_chat_set_to_stop_says_its_next_message_is_refused(desk, engine, qtbot):
    tab = _chat(desk, engine, sampling={"overflow": "stop"})
    _reply(desk, engine, tab, "Hi", _stats(prompt=440, generated=30))
    qtbot.waitUntil(lambda: tab.context_meter.label.text() == "Context 470 / 512 · nearly full")
    assert "the next message will be refused" in tab.context_meter.toolTip()


def test_a_saved_chat_measures_its_stored_reply_once_the_model_is_loaded(desk, engine, qtbot):
    conv = desk.repo.create_conversation(title="saved")
    desk.repo.add_message(conv.id, "user", "Hello")
    reply = desk.repo.start_reply(conv.id)
    desk.repo.finish_reply(reply.id, "Hi there.", prompt_tokens=1000, completion_tokens=24)
    desk.controllers.conversations.open_conversation(conv.id)
    qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None
                    and desk.window.tab_for(conv.id).model.rowCount() == 2)
    tab = desk.window.tab_for(conv.id)
    desk.settled()
    assert not tab.context_meter.isVisible()  # no model loaded yet: no context to measure against
    info = ModelInfo(path=Path("none.gguf"), description="", n_params=0, size_bytes=0, n_ctx_train=8192,
                     n_ctx=4096, n_seq_max=8, n_gpu_layers=0, gpu_offload_supported=False)
    engine.state = EngineState(EngineStatus.READY, info=info)
    desk.ctx.engine_signals.state_changed.emit(EngineState(EngineStatus.READY, info=info))
    qtbot.waitUntil(lambda: tab.context_meter.isVisible() and tab.context_meter.label.text() == "Context 1,024 / 4,096")


def _measured(qtbot, desk, conv_id: int, text: str) -> None:
    """The chat opened on another start of the app (its own engine, the model loaded): the
    meter shows `text`."""
    engine = scripted_engine(desk)
    desk.controllers.conversations.open_conversation(conv_id)
    qtbot.waitUntil(lambda: desk.window.tab_for(conv_id) is not None
                    and desk.window.tab_for(conv_id).model.rowCount() == 2)
    engine.state = SimpleNamespace(info=SimpleNamespace(n_ctx=512))
    desk.ctx.engine_signals.state_changed.emit(EngineState(EngineStatus.READY, info=_info(512)))
    meter = desk.window.tab_for(conv_id).context_meter
    qtbot.waitUntil(lambda: meter.isVisible() and meter.label.text() == text)


def _info(n_ctx: int) -> ModelInfo:
    return ModelInfo(path=Path("none.gguf"), description="", n_params=0, size_bytes=0, n_ctx_train=8192,
                     n_ctx=n_ctx, n_seq_max=8, n_gpu_layers=0, gpu_offload_supported=False)


def test_the_meter_stays_once_an_edited_reply_is_on_screen_after_restart_and_import(
        desk, engine, qtbot, tmp_path):
    """Issue 39, defect 10: an edited reply (saved beside the original, nothing generated)
    had no prompt count, and the meter went away, also after a restart and an import. The
    edited reply answers the same prompt: the meter measures that prompt."""
    tab = _chat(desk, engine)
    meter = tab.context_meter
    _reply(desk, engine, tab, "Hello", _stats(prompt=300, generated=100))
    qtbot.waitUntil(lambda: meter.isVisible() and meter.label.text() == "Context 400 / 512")
    reply = tab.model.views()[-1]
    tab.start_editing(reply.message_id, reply.text, "assistant")
    qtbot.keyClick(tab.composer, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(tab.composer, "A shorter answer.")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: tab.model.views()[-1].text == "A shorter answer.")
    desk.settled()
    qtbot.waitUntil(lambda: meter.isVisible() and meter.label.text() == "Context 300 / 512")

    again = Desk(qtbot, tmp_path)  # the next start, on the same data
    try:
        _measured(qtbot, again, tab.conversation_id, "Context 300 / 512")
    finally:
        again.close()

    exported = tmp_path / "all.json"
    desk.window.export_requested.emit(str(exported), "json", True)
    qtbot.waitUntil(lambda: "Exported" in desk.window.statusBar().currentMessage(), timeout=10_000)
    fresh = Desk(qtbot, tmp_path / "fresh")
    try:
        fresh.window.import_requested.emit(str(exported))
        qtbot.waitUntil(lambda: fresh.repo.list_conversations() != [], timeout=10_000)
        _measured(qtbot, fresh, fresh.repo.list_conversations()[0].id, "Context 300 / 512")
    finally:
        fresh.close()


def test_a_reply_edited_before_edits_kept_the_count_is_measured_by_its_original(desk, qtbot):
    """Issue 39, defect 10, on data stored before the fix: the edited reply has no prompt
    count; the original beside it (the same prompt) has one."""
    conv = desk.repo.create_conversation(title="edited long ago")
    question = desk.repo.add_message(conv.id, "user", "Hello")
    original = desk.repo.start_reply(conv.id)
    desk.repo.finish_reply(original.id, "Hi there, a long answer.", prompt_tokens=300, completion_tokens=60)
    desk.repo.add_message(conv.id, "assistant", "Hi.", parent_id=question.id)  # as edits were stored
    _measured(qtbot, desk, conv.id, "Context 300 / 512")
