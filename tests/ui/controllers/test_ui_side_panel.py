"""The chat tab's side panel: model, system prompt (and who shares it), sampling edited in
place, the last reply's numbers, Continue after the token limit; and a state line that never
contradicts the header of the reply on screen."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from app.engines.finish import rate_text
from storage import MessageStatus
from tests.support.gui_app import SCREENSHOTS, WAIT_MS, App
from ui.controllers.side_panel import PANEL_SETTING

pytestmark = pytest.mark.model


def tokens_in(text: str) -> int | None:
    found = re.search(r"(\d+) tokens", text)
    return int(found.group(1)) if found else None


def capture_requests(app) -> list:
    """Every ChatRequest the main engine is given, from now on."""
    engine = app.controllers.engines.engine
    sent, stream = [], engine.stream

    def recording(chat, sink):
        sent.append(chat)
        return stream(chat, sink)

    engine.stream = recording
    return sent


def test_panel_toggles_remembers_and_shows_the_chats_model_and_system_prompt(app):
    preset = app.ctx.catalog.create_preset("Pirate", "You are a pirate.", {"temperature": 0.3})
    app.controllers.conversations.new_chat(preset.id)
    app.qtbot.waitUntil(lambda: app.window.tabs.count() == 1)
    tab = app.window.tabs.widget(0)
    assert not tab.panel.isVisible()
    tab.panel_button.click()
    assert tab.panel.isVisible()
    conv = app.repo.get_conversation(tab.conversation_id)
    panel = tab.panel
    app.qtbot.waitUntil(lambda: panel.system_edit.toPlainText() == "You are a pirate.")
    assert panel.model_label.text() == app.ctx.engines.model_label(conv) == app.ctx.engines.model_name
    assert panel.sharing_label.text() == "Not shared"
    assert panel.preset_label.text() == "Pirate" and panel.spins["temperature"].value() == 0.3
    assert panel.spins["max_tokens"].value() == app.ctx.sampling.max_tokens  # the app's default
    # A second chat on the same preset: both start with the same cached cells.
    app.controllers.conversations.new_chat(preset.id)
    app.qtbot.waitUntil(lambda: app.window.tabs.count() == 2)
    second = app.window.tabs.widget(1)
    assert second.panel.isVisible()  # open in every tab
    app.qtbot.waitUntil(lambda: second.panel.sharing_label.text() == "Shared with 1 other chat")
    app.qtbot.waitUntil(lambda: app.ctx.catalog.get_setting(PANEL_SETTING) == {"open": True})
    second.panel_button.click()
    assert not tab.panel.isVisible() and not second.panel.isVisible()
    app.qtbot.waitUntil(lambda: app.ctx.catalog.get_setting(PANEL_SETTING) == {"open": False})


def test_the_open_panel_is_remembered_across_restarts(qtbot, data_dir, model_path, qt_asyncio):
    first = App(qtbot, data_dir, model_path)
    try:
        tab = first.new_tab()
        tab.panel_button.click()
        qtbot.waitUntil(lambda: first.ctx.catalog.get_setting(PANEL_SETTING) == {"open": True})
    finally:
        first.close()
    second = App(qtbot, data_dir, model_path)
    try:
        tab = second.new_tab()
        qtbot.waitUntil(lambda: tab.panel.isVisible())
    finally:
        second.close()


def test_an_edited_system_prompt_is_kept_and_used_by_the_next_request(app):
    tab = app.new_tab()
    tab.panel_button.click()
    tab.panel.system_edit.setPlainText("Answer in French.")
    assert tab.panel.save_prompt_button.isEnabled()
    tab.panel.save_prompt_button.click()

    def stored() -> str:
        messages = app.repo.active_path(tab.conversation_id).messages
        return messages[0].content if messages and messages[0].role == "system" else ""

    app.qtbot.waitUntil(lambda: stored() == "Answer in French.")
    app.qtbot.waitUntil(lambda: tab.model.rowCount() == 1 and tab.model.view(0).role == "system")
    sent = capture_requests(app)
    app.send(tab, "Hello.")
    app.wait_done(tab)
    assert sent[-1].messages[0] == {"role": "system", "content": "Answer in French."}
    # Reopened, the chat has the same prompt.
    conv_id = tab.conversation_id
    app.window.tabs.removeTab(app.window.tabs.indexOf(tab))
    app.controllers.conversations.open_conversation(conv_id)
    app.qtbot.waitUntil(lambda: app.window.tab_for(conv_id) is not None)
    reopened = app.window.tab_for(conv_id)
    app.qtbot.waitUntil(lambda: reopened.panel.system_edit.toPlainText() == "Answer in French.")
    assert not reopened.panel.save_prompt_button.isEnabled()


def test_sampling_edited_in_the_panel_is_saved_and_used_for_the_next_reply(app):
    tab = app.new_tab()
    tab.panel_button.click()
    app.qtbot.waitUntil(lambda: tab.panel.spins["max_tokens"].value() == app.ctx.sampling.max_tokens)
    tab.panel.spins["max_tokens"].setValue(7)
    tab.panel.spins["top_k"].setValue(5)
    app.qtbot.waitUntil(lambda: app.repo.get_conversation(tab.conversation_id).sampling.get("max_tokens") == 7)
    app.qtbot.waitUntil(lambda: app.repo.get_conversation(tab.conversation_id).sampling.get("top_k") == 5)
    # Fields left at the app's defaults keep following them.
    assert "temperature" not in app.repo.get_conversation(tab.conversation_id).sampling
    sent = capture_requests(app)
    app.send(tab, "Count to ten.")
    app.wait_done(tab)
    assert (sent[-1].sampling.max_tokens, sent[-1].sampling.top_k) == (7, 5)
    assert "7 tokens" in app.last(tab).meta


def test_the_last_replys_numbers_match_the_stored_stats(app):
    tab = app.new_tab()
    tab.panel_button.click()
    app.send(tab, "Name a colour.")
    app.wait_done(tab)
    stored = app.stored_last(tab.conversation_id, MessageStatus.COMPLETE)
    numbers = tab.panel.numbers
    app.qtbot.waitUntil(lambda: numbers["tokens"].text() == str(stored.completion_tokens))
    assert numbers["ttft"].text() == f"{stored.ttft_s:.2f} s"
    rate = rate_text(stored.tokens_per_s)  # written one way in the panel, the header and the line
    assert numbers["rate"].text() == rate and rate in app.last(tab).meta
    assert tab.state_label.text() == "cut at the token limit"  # each number once in the tab: on the header
    assert numbers["cached"].text().endswith(f"of {stored.prompt_tokens} tokens")
    # ignore_eos: the reply ran to max_tokens, and says so.
    assert numbers["finish"].text() == "cut at the token limit"
    assert tab.panel.continue_button.isVisible() and tab.panel.continue_button.isEnabled()
    assert tokens_in(app.last(tab).meta) == stored.completion_tokens


def test_the_state_line_never_contradicts_the_header_after_a_branch_switch(app):
    """Issue 11: "a header said 102 tokens where the line above said 121". The line kept the
    numbers of the reply last written while the branch on screen showed another reply."""
    tab = app.new_tab()
    app.send(tab, "Say something.")
    app.wait_done(tab)
    first = app.last(tab)
    app.ctx.sampling = replace(app.ctx.sampling, max_tokens=12)
    tab.regenerate_button.click()
    app.qtbot.waitUntil(lambda: app.last(tab).key != first.key, timeout=10_000)
    app.wait_done(tab)
    assert tokens_in(app.last(tab).meta) == 12 and tokens_in(tab.state_label.text()) is None
    tab.branch_requested.emit(app.last(tab).message_id, -1)
    app.qtbot.waitUntil(lambda: app.last(tab).key == first.key, timeout=10_000)
    header = tokens_in(app.last(tab).meta)
    assert header == 40
    line = tokens_in(tab.state_label.text())
    assert line is None or line == header, (tab.state_label.text(), app.last(tab).meta)


def test_continue_writes_more_of_the_same_message(app):
    tab = app.new_tab()
    tab.panel_button.click()
    app.qtbot.waitUntil(lambda: tab.panel.spins["max_tokens"].value() == app.ctx.sampling.max_tokens)
    tab.panel.spins["max_tokens"].setValue(8)
    app.qtbot.waitUntil(lambda: app.repo.get_conversation(tab.conversation_id).sampling.get("max_tokens") == 8)
    app.send(tab, "Tell me a long story about a cat.")
    app.wait_done(tab)
    cut = app.stored_last(tab.conversation_id, MessageStatus.COMPLETE)
    assert cut.completion_tokens == 8
    panel = tab.panel
    app.qtbot.waitUntil(lambda: panel.continue_button.isEnabled())
    assert panel.numbers["finish"].text() == "cut at the token limit"
    rows = tab.model.rowCount()
    panel.continue_button.click()
    app.qtbot.waitUntil(lambda: panel.numbers["tokens"].text() == "16", timeout=WAIT_MS)
    app.wait_done(tab)
    done = app.stored_last(tab.conversation_id, MessageStatus.COMPLETE)
    assert done.id == cut.id and done.completion_tokens == 16  # the same message, longer
    assert done.content.startswith(cut.content) and len(done.content) > len(cut.content)
    assert tab.model.rowCount() == rows and app.last(tab).text == done.content  # shown == stored
    assert len(app.repo.active_path(tab.conversation_id).messages) == 2
    # The finish reason and counts are the continued reply's: 8 more tokens, cut again.
    assert panel.numbers["finish"].text() == "cut at the token limit"
    assert tokens_in(app.last(tab).meta) == 16


def test_screenshot_of_the_side_panel(qtbot, data_dir, model_path, theme, qt_asyncio):
    shot = App(qtbot, data_dir, model_path, max_tokens=60)
    try:
        shot.window.resize(1280, 800)
        preset = shot.ctx.catalog.create_preset("Concise", "You are a concise assistant. Answer in a few sentences.")
        shot.controllers.conversations.new_chat(preset.id)
        qtbot.waitUntil(lambda: shot.window.tabs.count() == 1)
        shot.controllers.conversations.new_chat(preset.id)
        qtbot.waitUntil(lambda: shot.window.tabs.count() == 2)
        tab = shot.window.tabs.widget(1)
        tab.panel_button.click()
        shot.send(tab, "What is a hash map?")
        shot.wait_done(tab)
        qtbot.waitUntil(lambda: tab.panel.numbers["finish"].text() == "cut at the token limit")
        qtbot.waitUntil(lambda: shot.window.status.engine_label.text().endswith("· idle"))  # the engine's next figures
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        image = shot.window.grab().toImage()
        assert image.save(str(SCREENSHOTS / f"side-panel-{theme}.png"))
        assert tab.panel.sharing_label.text().startswith("Shared with 1 other chat")
    finally:
        shot.close()


def test_a_chat_past_the_context_goes_on_and_says_what_the_model_no_longer_saw(qtbot, data_dir, model_path,
                                                                                qt_asyncio):
    """Issue 26, part 3 / issue 27, context use: on a 512-token context a long chat's next
    reply drops the oldest turns (the default), and the panel says how many; a chat set to
    stop is refused with the engine's reason instead."""
    app = App(qtbot, data_dir, model_path, max_tokens=8, n_ctx=512)
    try:
        conv = app.repo.create_conversation(title="long")
        parent = None
        for i in range(30):
            parent = app.repo.add_message(conv.id, "user", f"Tell me about item {i}.", parent_id=parent).id
            parent = app.repo.add_message(conv.id, "assistant", f"Item {i} is a fine thing to have.",
                                          parent_id=parent).id
        app.controllers.conversations.open_conversation(conv.id)
        qtbot.waitUntil(lambda: app.window.tab_for(conv.id) is not None)
        tab = app.window.tab_for(conv.id)
        tab.panel_button.click()
        app.send(tab, "And the last one?")
        app.wait_done(tab)
        assert app.last(tab).status == "complete"
        qtbot.waitUntil(lambda: tab.panel.numbers["seen"].text().startswith("all but "), timeout=10_000)
        dropped = int(tab.panel.numbers["seen"].text().split()[2])
        assert 10 < dropped < 61

        tab.panel.overflow_box.setCurrentIndex(tab.panel.overflow_box.findData("stop"))
        qtbot.waitUntil(lambda: app.repo.get_conversation(conv.id).sampling.get("overflow") == "stop")
        app.send(tab, "Once more?")
        app.wait_done(tab)
        last = app.last(tab)
        assert last.status == "error" and "context holds 512" in last.text + last.meta, last
    finally:
        app.close()
