"""The composer box on its own (issue 27): the app's stylesheet colours its Send button from
the theme, with a hover state; the files of a message that could not be stored come back
as chips with its text; a failed chip is never sent."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, Qt

from storage import ChunkSpan, NewDocument
from tests.support.pixels import pixel
from tests.support.shown import shown
from ui.widgets.chat.attachment_chips import ChipState

DOC = NewDocument("d" * 64, "plan.txt", "text/plain", 12, "Ship it soon", None, (ChunkSpan(0, 12),))


def _tab(qtbot):
    from ui.widgets.chat.chat_tab import ChatTab

    return shown(qtbot, ChatTab(1, "composer"), 700, 500)


def test_the_send_button_takes_the_theme_s_colour_and_changes_under_the_mouse(qtbot, qapp, theme):
    tab = _tab(qtbot)
    button = tab.send_button
    edge = QPoint(5, button.height() // 2)  # inside the round button, off its arrow
    palette = qapp.palette()

    def colour() -> str:
        return pixel(button.grab().toImage(), button, button, edge).name()

    assert colour() == palette.highlight().color().name()
    # The pointer may already rest where the button is (an earlier test left it there): a
    # move onto the same spot sends no enter event. Start from elsewhere in the window.
    qtbot.mouseMove(tab, QPoint(2, 2))
    qtbot.waitUntil(lambda: not button.underMouse())
    qtbot.mouseMove(button)
    qtbot.waitUntil(button.underMouse)
    qtbot.waitUntil(lambda: colour() == palette.link().color().name())


def test_a_message_that_was_not_stored_gets_its_files_back(qtbot):
    tab = _tab(qtbot)
    sent = []
    tab.send_requested.connect(lambda text, documents: sent.append((text, documents)))
    tab.composer_box.restore_documents([DOC])
    qtbot.keyClicks(tab.composer, "Read the plan")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    assert sent == [("Read the plan", (DOC,))]
    assert tab.composer_box.tray.chips() == []
    tab.restore_unsent("Read the plan")  # what ConversationActions does when storage failed
    (chip,) = tab.composer_box.tray.chips()
    assert chip.state is ChipState.READY and chip.document == DOC
    assert tab.composer.toPlainText() == "Read the plan"


def test_a_failed_chip_holds_the_message_back_and_a_reading_one_holds_send_back(qtbot):
    tab = _tab(qtbot)
    sent = []
    tab.send_requested.connect(lambda text, documents: sent.append((text, documents)))
    failed, reading = tab.composer_box.tray.add_files([Path("broken.pdf"), Path("big.pdf")])
    failed.set_failed("broken.pdf is damaged")
    assert not tab.send_button.isEnabled()  # big.pdf is still being read
    qtbot.keyClicks(tab.composer, "Both?")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    assert sent == [] and tab.composer.toPlainText() == "Both?"
    assert tab.composer_box.notice.toolTip().startswith("Not sent: broken.pdf could not be read.")
    reading.set_ready(DOC)
    assert tab.send_button.isEnabled()  # clickable, to say why it does not send
    qtbot.mouseClick(tab.send_button, Qt.MouseButton.LeftButton)
    assert sent == [] and tab.composer.toPlainText() == "Both?" and len(tab.composer_box.tray.chips()) == 2
    qtbot.mouseClick(failed.close_button, Qt.MouseButton.LeftButton)
    assert not tab.composer_box.notice.isVisibleTo(tab)
    qtbot.mouseClick(tab.send_button, Qt.MouseButton.LeftButton)
    assert sent == [("Both?", (DOC,))]  # with the file read, once the damaged one is removed


def test_send_and_stop_take_turns_in_one_place_at_once(qtbot):
    """No layout pass in between: a window grabbed right after a reply ended showed Send
    where it was last placed, a button's width from the box's edge."""
    tab = _tab(qtbot)
    tab.set_busy(True)
    stop_at = tab.stop_button.geometry()
    tab.set_busy(False)
    assert tab.send_button.geometry() == stop_at and not tab.stop_button.isVisible()
    tab.set_busy(True)
    assert tab.stop_button.geometry() == stop_at and not tab.send_button.isVisible()


def test_a_chips_long_text_is_elided_with_the_whole_text_in_its_tooltip(qtbot):
    """Issue 39, defect 13: chips cut their text mid-word with no way to read the rest
    ("broken.pdf is not a PDF (it has", "2,641 charact")."""
    from ui.widgets.chat.document_labels import document_details

    tab = _tab(qtbot)
    failed, ready = tab.composer_box.tray.add_files([Path("broken.pdf"), Path("notes.txt")])
    reason = "broken.pdf is not a PDF (it has no %PDF header: perhaps another kind of file renamed)"
    failed.set_failed(reason)
    fit = "2,641 tokens · goes whole into the model's context of 4,096"
    ready.set_ready(DOC, fit)
    details = document_details(DOC.pages, DOC.size_bytes, len(DOC.text))
    for chip, whole in ((failed, reason), (ready, f"{details}\n{fit}")):
        label = chip.details
        qtbot.waitUntil(lambda w=whole, lab=label: lab.toolTip() == w)  # once the chip is laid out
        for line in label.text().splitlines():
            assert label.fontMetrics().horizontalAdvance(line) <= label.contentsRect().width(), line
        last, whole_last = label.text().splitlines()[-1], whole.splitlines()[-1]
        kept = last.removesuffix("…")
        assert last.endswith("…") and whole_last.startswith(kept), last
        assert whole_last[len(kept)] in " ·,:;(", last  # ends at a whole word


def test_enter_while_a_reply_is_written_queues_the_message_until_it_ends(qtbot):
    """Issue 39 (what users ask for): the message waits, marked as queued and still in the
    box, and goes with its files when the reply ends; Cancel leaves it there unsent."""
    tab = _tab(qtbot)
    sent = []
    tab.send_requested.connect(lambda text, documents: sent.append((text, documents)))
    tab.set_busy(True)
    tab.composer_box.restore_documents([DOC])
    qtbot.keyClicks(tab.composer, "And the budget?")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    bar = tab.composer_box.queue_bar
    assert sent == [] and bar.isVisible() and tab.composer.toPlainText() == "And the budget?"
    assert tab.composer_box.queue_bar.label.text() == "Queued: sent when the reply ends"
    tab.set_busy(False)
    qtbot.waitUntil(lambda: sent == [("And the budget?", (DOC,))])
    assert not bar.isVisible() and tab.composer.toPlainText() == ""

    tab.set_busy(True)
    qtbot.keyClicks(tab.composer, "Never mind")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    qtbot.mouseClick(tab.composer_box.queue_bar.cancel_button, Qt.MouseButton.LeftButton)
    assert not bar.isVisible()
    tab.set_busy(False)
    qtbot.wait(50)  # (nothing is to happen: the queue timer would fire at once)
    assert len(sent) == 1 and tab.composer.toPlainText() == "Never mind"


def test_stop_unqueues_the_message(qtbot):
    tab = _tab(qtbot)
    sent = []
    tab.send_requested.connect(lambda text, documents: sent.append((text, documents)))
    tab.set_busy(True)
    qtbot.keyClicks(tab.composer, "Wait")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    qtbot.mouseClick(tab.stop_button, Qt.MouseButton.LeftButton)
    tab.set_busy(False)
    qtbot.wait(50)  # (nothing is to happen)
    assert sent == [] and tab.composer.toPlainText() == "Wait" and not tab.composer_box.queue_bar.isVisible()


def test_slash_and_a_name_puts_a_saved_prompt_in_the_box_with_its_blank_selected(qtbot):
    """Issue 39 (what users ask for): the prompt library in the composer, by keys alone."""
    from app.chats.prompt_library import SavedPrompt

    tab = _tab(qtbot)
    sent = []
    tab.send_requested.connect(lambda text, documents: sent.append(text))
    tab.composer_box.set_saved_prompts([SavedPrompt("summarise", "Summarise {{text}} briefly."),
                                        SavedPrompt("translate", "Translate: {{text}}"),
                                        SavedPrompt("sum up", "In one line: {{text}}")])
    listed = tab.composer_box.prompt_list
    qtbot.keyClicks(tab.composer, "/su")
    assert listed.isVisible() and [listed.item(i).text().split()[0] for i in range(listed.count())] \
        == ["/summarise", "/sum"]
    qtbot.keyClick(tab.composer, Qt.Key.Key_Down)
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)  # takes the prompt, does not send "/su"
    assert sent == [] and not listed.isVisible()
    assert tab.composer.toPlainText() == "In one line: {{text}}"
    qtbot.keyClicks(tab.composer, "the moon landing")  # types over the selected blank
    assert tab.composer.toPlainText() == "In one line: the moon landing"
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    assert sent == ["In one line: the moon landing"]

    qtbot.keyClicks(tab.composer, "/tr")
    assert listed.isVisible()
    qtbot.keyClick(tab.composer, Qt.Key.Key_Escape)  # closes the list; the text stays
    assert not listed.isVisible() and tab.composer.toPlainText() == "/tr"
    qtbot.keyClick(tab.composer, Qt.Key.Key_Backspace)
    assert listed.isVisible()  # typing brings it back
    tab.composer.clear()
    qtbot.keyClicks(tab.composer, "/etc/hosts is missing")  # no name matches: an ordinary message
    assert not listed.isVisible()
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    assert sent[-1] == "/etc/hosts is missing"


def test_the_box_grows_with_its_lines_then_scrolls_and_shrinks_when_sent(qtbot):
    """Issue 39's look: it was 46 px whatever was typed (a long question scrolled in two lines)."""
    from ui.widgets.chat.composer import COMPOSER_MAX_LINES, COMPOSER_MIN_H

    tab = _tab(qtbot)
    box = tab.composer
    assert box.height() == COMPOSER_MIN_H
    qtbot.keyClicks(box, "first line")
    for i in range(4):
        qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
        qtbot.keyClicks(box, f"line {i}")
    qtbot.waitUntil(lambda: box.height() > COMPOSER_MIN_H)
    five = box.height()
    assert box.verticalScrollBar().maximum() == 0  # all five lines in sight
    qtbot.keyClicks(box, " word" * 300)  # wrapped lines count too
    qtbot.waitUntil(lambda: box.verticalScrollBar().maximum() > 0)
    assert five < box.height() <= COMPOSER_MAX_LINES * box.fontMetrics().lineSpacing() * 1.5 + 20
    qtbot.keyClick(box, Qt.Key.Key_Return)  # sent: the box is empty and small again
    qtbot.waitUntil(lambda: box.height() == COMPOSER_MIN_H)
