"""The side panel as a widget, no model: what it shows and emits, and that the window keeps
fitting 900x600 with it open."""

from __future__ import annotations

from ui.widgets.chat.chat_side_panel import SETTING_NAMES, ChatSidePanel, ReplyNumbers


def test_the_window_fits_900_by_600_with_the_side_panel_open(window, qtbot):
    tab = window.open_tab(1, "a chat")
    tab.panel_button.click()
    qtbot.waitUntil(lambda: tab.panel.isVisible())
    qtbot.wait(50)  # the layout settles over a couple of events
    assert window.minimumSizeHint().width() <= 900 and window.minimumSizeHint().height() <= 600
    assert (window.width(), window.height()) == (900, 600)
    assert tab.view.width() >= 250  # the chat keeps a usable width
    assert tab.panel_button.text() == "Hide details"


def test_continue_shows_only_after_a_reply_cut_at_the_limit_and_waits_while_busy(qtbot):
    panel = ChatSidePanel()
    qtbot.addWidget(panel)
    panel.show()
    assert not panel.continue_button.isVisible()
    panel.set_numbers(ReplyNumbers(ttft_s=0.25, tok_s=7.5, tokens=8, prompt_tokens=30, cached_tokens=20,
                                   finish="cut at the token limit", can_continue=True))
    assert panel.continue_button.isVisible() and panel.continue_button.isEnabled()
    assert [panel.numbers[k].text() for k in ("ttft", "rate", "tokens", "cached", "finish")] == [
        "0.25 s", "7.5 tok/s", "8", "20 of 30 tokens", "cut at the token limit"]
    panel.set_busy(True)
    assert not panel.continue_button.isEnabled()
    panel.set_numbers(ReplyNumbers(tokens=12, finish="done"))
    assert not panel.continue_button.isVisible() and panel.numbers["cached"].text() == "—"


def test_edits_are_emitted_and_loading_values_is_not_an_edit(qtbot):
    panel = ChatSidePanel()
    qtbot.addWidget(panel)
    changed, saved = [], []
    panel.sampling_changed.connect(changed.append)
    panel.system_prompt_saved.connect(saved.append)
    values = {"temperature": 0.7, "top_p": 0.9, "min_p": 0.05, "repeat_penalty": 1.1, "top_k": 40, "max_tokens": 64,
              "overflow": "stop"}
    panel.set_sampling(values, "Pirate")
    panel.set_system_prompt("Be brief.")
    assert changed == [] and not panel.save_prompt_button.isEnabled()
    assert set(panel.sampling()) == set(SETTING_NAMES) and panel.sampling() == values
    panel.overflow_box.setCurrentIndex(panel.overflow_box.findData("truncate_middle"))
    assert changed[-1]["overflow"] == "truncate_middle"
    panel.spins["max_tokens"].setValue(8)
    assert changed[-1]["max_tokens"] == 8 and isinstance(changed[-1]["max_tokens"], int)
    panel.system_edit.setPlainText("Be very brief.")
    assert panel.save_prompt_button.isEnabled()
    panel.save_prompt_button.click()
    assert saved == ["Be very brief."] and not panel.save_prompt_button.isEnabled()


def test_the_panel_says_how_much_of_the_chat_the_model_saw(qtbot):
    panel = ChatSidePanel()
    qtbot.addWidget(panel)
    assert panel.numbers["seen"].text() == "—"  # a reply of an earlier run: not known
    panel.set_numbers(ReplyNumbers(tokens=3, dropped=0))
    assert panel.numbers["seen"].text() == "the whole chat"
    panel.set_numbers(ReplyNumbers(tokens=3, dropped=12))
    assert panel.numbers["seen"].text() == "all but 12 earlier messages (the context is full)"


def test_the_last_prompts_image_tokens_show_only_where_it_had_images(qtbot):
    from dataclasses import replace

    from inference import Delta, FinishReason, RequestStats
    from ui.controllers.side_panel import numbers_from_delta

    panel = ChatSidePanel()
    qtbot.addWidget(panel)
    panel.show()
    row = panel.numbers["images"]
    panel.set_numbers(ReplyNumbers(tokens=8))
    assert not row.isVisible()
    stats = RequestStats(prompt_tokens=120, cached_tokens=0, generated_tokens=8, queue_s=0, ttft_s=0.1,
                         decode_tok_s=9.0, itl_p50_s=None, itl_p95_s=None, total_s=1.0, image_tokens=64)
    for cached, shown in ((0, "64 tokens, computed for this reply"), (80, "64 tokens, reused from the cache"),
                          (30, "64 tokens, 20 reused from the cache")):
        image_cached = min(64, max(0, cached - 10))  # the image after 10 tokens of text
        delta = Delta.finished_with("r", FinishReason.STOP, stats=replace(
            stats, cached_tokens=cached, image_tokens_cached=image_cached))
        panel.set_numbers(numbers_from_delta(delta))
        assert row.isVisible() and row.text() == shown


def test_no_label_of_the_panel_is_cut(qtbot):
    """At the panel's fixed width every form label shows whole ("Past the contex" was cut at
    the sampling form's widest label)."""
    from PySide6.QtWidgets import QLabel

    panel = ChatSidePanel()
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitExposed(panel)
    labels = [w for w in panel.findChildren(QLabel) if w.isVisible() and w.text() and not w.wordWrap()]
    assert len(labels) > 10
    cut = [w.text() for w in labels if w.width() < w.fontMetrics().horizontalAdvance(w.text())]
    assert not cut, cut
