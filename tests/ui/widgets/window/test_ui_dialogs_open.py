"""Dialogs that used to run a nested event loop (QMessageBox.warning, QInputDialog.getText,
QFileDialog.getOpenFileName/getSaveFileName) now open with open(): the call returns at once,
the dialog is on screen, and its answer arrives as a signal. No model needed."""

from __future__ import annotations

from PySide6.QtWidgets import QDialogButtonBox, QFileDialog, QInputDialog, QMessageBox

from ui.widgets.compare.compare_view import CompareView
from ui.widgets.models.model_dialog import ModelDialog
from ui.widgets.models.remote_dialog import RemoteDialog


def test_an_error_is_a_window_modal_box_that_does_not_block(window, qtbot):
    box = window.show_error("Cannot serve", "port 8080 is in use")  # returns: no nested loop
    assert isinstance(box, QMessageBox) and box is window.error_box
    qtbot.waitUntil(box.isVisible)
    assert box.text() == "port 8080 is in use" and box.windowTitle() == "Cannot serve"
    assert box.isModal()
    box.accept()


def test_rename_asks_in_an_open_dialog_and_emits_the_new_title(window, qtbot):
    dialog = window.conversation_list.ask_rename(5, "Old title", False)
    assert isinstance(dialog, QInputDialog)
    qtbot.waitUntil(dialog.isVisible)
    assert dialog.textValue() == "Old title"
    dialog.setTextValue("  New title ")
    with qtbot.waitSignal(window.rename_requested) as signal:
        dialog.accept()
    assert signal.args == [5, "New title"]


def test_connect_to_a_server_is_one_dialog_with_ok_only_when_filled(window, qtbot):
    window.ask_remote()
    dialog = next(d for d in window.findChildren(RemoteDialog) if d.isVisible())
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    assert not ok.isEnabled()  # no model yet
    dialog.model.setText("qwen")
    dialog.key.setText("secret")
    assert ok.isEnabled()
    with qtbot.waitSignal(window.remote_requested) as signal:
        ok.click()
    assert signal.args == ["http://127.0.0.1:8080/v1", "qwen", "secret"]


def test_browse_for_a_model_opens_a_file_dialog_and_fills_the_path(qtbot, tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    dialog = ModelDialog(None)
    qtbot.addWidget(dialog)
    dialog.open()
    dialog._browse()
    browser = dialog.browser
    assert isinstance(browser, QFileDialog)
    qtbot.waitUntil(browser.isVisible)
    browser.selectFile(str(model))
    browser.accept()
    qtbot.waitUntil(lambda: dialog.path_edit.text() == str(model))


def test_export_of_a_comparison_asks_for_the_file_in_an_open_dialog(qtbot, tmp_path):
    view = CompareView(1, "Sorting")
    qtbot.addWidget(view)
    view.show()
    view._export_clicked()
    browser = next(d for d in view.findChildren(QFileDialog) if d.isVisible())
    assert browser.acceptMode() == QFileDialog.AcceptMode.AcceptSave
    target = tmp_path / "out.md"
    browser.selectFile(str(target))
    with qtbot.waitSignal(view.export_requested) as signal:
        browser.accept()
    assert signal.args == [str(target)]
