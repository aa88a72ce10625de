"""The prompt library in the window (ui/controllers/prompts.py): written in Chat → Prompt
library… with keys, saved in the catalog at once, offered in every chat's box after "/"
and there again after a restart."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from tests.support.window import menu_action


def test_a_prompt_written_in_the_library_is_saved_and_used_with_slash(desk, qtbot):
    desk.controllers.prompts.start()
    tab = desk.open_chat("first")
    menu_action(desk.window, "Prompt library…").trigger()
    dialog = desk.controllers.prompts.dialog
    qtbot.waitUntil(lambda: dialog is not None and dialog.isVisible())
    dialog.activateWindow()
    qtbot.waitUntil(lambda: dialog.isActiveWindow() and dialog.name_edit.hasFocus())
    QTest.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)  # nothing typed yet
    assert dialog.problem_label.text() == "A prompt needs a name (typed after / in the composer)."
    QTest.mouseClick(dialog.name_edit, Qt.MouseButton.LeftButton)  # back to the name (Save took the focus)
    qtbot.waitUntil(dialog.name_edit.hasFocus)
    qtbot.keyClicks(dialog.name_edit, "eli5")
    qtbot.keyClick(dialog.name_edit, Qt.Key.Key_Tab)
    qtbot.waitUntil(lambda: dialog.text_edit.hasFocus())
    qtbot.keyClicks(dialog.text_edit, "Explain {{topic}} to a five-year-old.")
    QTest.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: desk.ctx.catalog.get_setting("prompt_library")
                    == [{"name": "eli5", "text": "Explain {{topic}} to a five-year-old."}])
    assert [dialog.names.item(i).text() for i in range(dialog.names.count())] == ["eli5"]
    dialog.close()

    desk.window.activateWindow()
    qtbot.waitUntil(desk.window.isActiveWindow)
    tab.composer.setFocus()
    qtbot.keyClicks(tab.composer, "/el")
    qtbot.waitUntil(lambda: tab.composer_box.prompt_list.isVisible())
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    qtbot.keyClicks(tab.composer, "gravity")
    assert tab.composer.toPlainText() == "Explain gravity to a five-year-old."

    later = desk.open_chat("opened after")  # a tab opened later has it too
    later.composer.setFocus()
    qtbot.keyClicks(later.composer, "/")
    qtbot.waitUntil(lambda: later.composer_box.prompt_list.isVisible())

    prompts = desk.controllers.prompts
    prompts.prompts = []
    prompts.start()  # what the next start reads
    qtbot.waitUntil(lambda: [p.name for p in prompts.prompts] == ["eli5"])
