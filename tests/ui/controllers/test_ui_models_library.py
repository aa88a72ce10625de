"""The Models window's Library tab and its offline behaviour, on a real database and real
files in a temporary data folder, no engine and no network: the Hub is a closed port on
loopback, or HF_HUB_OFFLINE."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QMessageBox

from tests.support.models_ui_app import WAIT_MS, ModelsShell
from tests.support.net import unused_port

TEMPLATE = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"


def go_offline(monkeypatch) -> None:
    from huggingface_hub import constants as hf_constants

    # huggingface_hub reads HF_HUB_OFFLINE once, when it is imported (at the app's start)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)


@pytest.fixture(autouse=True)
def no_hub(monkeypatch):
    """No network: a closed port as the Hub, and offline unless a test says otherwise."""
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{unused_port()}")
    go_offline(monkeypatch)


@pytest.fixture
def shell(qtbot, tmp_path, qt_asyncio):
    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    (data / "models" / "other.gguf").write_bytes(b"GGUF" + bytes(4092))
    (data / "models" / "main.gguf").write_bytes(b"GGUF" + bytes(8188))
    instance = ModelsShell(qtbot, data, model_path=data / "models" / "main.gguf")
    yield instance
    instance.close()


def open_library(shell: ModelsShell):
    win = shell.open()
    win.show_library()
    shell.qtbot.waitUntil(lambda: {"other.gguf", "main.gguf"} <= set(shell.library_names()), timeout=WAIT_MS)
    return win, win.library


def test_the_library_lists_installed_models_with_size_and_source(shell):
    _win, view = open_library(shell)
    rows = {view.list.topLevelItem(i).text(0): view.list.topLevelItem(i) for i in range(view.list.topLevelItemCount())}
    assert "main.gguf  (loaded)" in rows and "other.gguf" in rows
    other = rows["other.gguf"]
    assert other.text(1) == "4.0 KiB" and other.text(2) == "Local file" and other.text(3) == "never"
    assert view.message.text() == ""


def test_an_empty_library_says_where_models_come_from(shell, qtbot):
    win = shell.open()
    for name in ("other.gguf", "main.gguf"):
        (shell.models_dir / name).unlink()
    shell.models.library_tab.refresh()
    qtbot.waitUntil(lambda: "find one in Discover" in win.library.message.text(), timeout=WAIT_MS)
    assert win.library.names() == [] and win.library.list.topLevelItemCount() == 0
    assert not win.library.load_button.isEnabled() and not win.library.delete_button.isEnabled()


def test_delete_asks_first_and_removes_the_file_when_confirmed(shell, qtbot):
    _win, view = open_library(shell)
    view.select("other.gguf")
    view.delete_button.click()
    box = view.delete_box
    qtbot.waitUntil(box.isVisible)  # open(), not exec(): the call returned with the box up
    assert "other.gguf" in box.text()
    box.button(QMessageBox.StandardButton.No).click()
    shell.settled()
    assert (shell.models_dir / "other.gguf").exists() and "other.gguf" in view.names()

    view.delete_button.click()
    with qtbot.waitSignal(view.delete_requested) as asked:
        view.delete_box.button(QMessageBox.StandardButton.Yes).click()
    assert asked.args == ["other.gguf"]
    qtbot.waitUntil(lambda: "other.gguf" not in view.names(), timeout=WAIT_MS)
    assert not (shell.models_dir / "other.gguf").exists()
    assert view.message.text() == "Deleted other.gguf."


def test_delete_is_refused_while_the_model_is_loaded(shell, qtbot):
    _win, view = open_library(shell)
    view.select("main.gguf")
    view.delete_button.click()
    view.delete_box.button(QMessageBox.StandardButton.Yes).click()
    qtbot.waitUntil(lambda: "is loaded" in view.message.text(), timeout=WAIT_MS)
    assert "\n" not in view.message.text()  # one line, not a traceback
    assert (shell.models_dir / "main.gguf").exists() and "main.gguf" in view.names()


def test_per_model_defaults_are_saved_and_shown_again(shell, qtbot):
    from app.models.library import ModelDefaults, ModelLibrary

    _win, view = open_library(shell)
    view.select("other.gguf")
    view.n_ctx.setValue(4096)
    view.n_threads.setValue(2)
    view.chat_template.setPlainText(TEMPLATE)
    view.save_button.click()
    qtbot.waitUntil(lambda: view.message.text().startswith("Saved the defaults for other.gguf"), timeout=WAIT_MS)
    shell.settled()
    saved = ModelLibrary(shell.db, shell.models_dir).defaults_for(shell.models_dir / "other.gguf")
    assert saved == ModelDefaults(n_ctx=4096, n_threads=2, chat_template=TEMPLATE.strip())

    view.select("main.gguf")  # its own defaults: none
    assert view.n_ctx.value() == 0 and view.n_ctx.text() == "App default"
    view.select("other.gguf")  # read back from the library
    qtbot.waitUntil(lambda: view.n_ctx.value() == 4096 and view.n_threads.value() == 2, timeout=WAIT_MS)
    assert view.n_gpu_layers.text() == "App default"


def test_saving_the_editor_keeps_the_kv_type_and_speculation_and_sets_a_draft_model(shell, qtbot):
    """The KV type and speculative mode set on the command line survive a save of the
    editor (they were dropped before it showed them), and a draft model is chosen from the
    other installed models."""
    from PySide6.QtCore import Qt

    from app.models.library import ModelDefaults, ModelLibrary

    library = ModelLibrary(shell.db, shell.models_dir)
    library.set_defaults("other.gguf", ModelDefaults(kv_type="q8_0", speculative="lookup"))
    _win, view = open_library(shell)
    view.select("other.gguf")
    qtbot.waitUntil(lambda: view.speculative.currentData() == "lookup", timeout=WAIT_MS)
    assert view.kv_type.currentData() == "q8_0" and not view.draft_model.isEnabled()
    view.n_ctx.setValue(4096)
    qtbot.mouseClick(view.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.message.text().startswith("Saved the defaults for other.gguf"), timeout=WAIT_MS)
    shell.settled()
    assert library.defaults_for(shell.models_dir / "other.gguf") == ModelDefaults(
        n_ctx=4096, kv_type="q8_0", speculative="lookup")

    view.speculative.setCurrentIndex(view.speculative.findData("draft"))
    assert view.draft_model.isEnabled() and view.draft_model.currentText() == "main.gguf"
    view.set_message("")
    qtbot.mouseClick(view.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.message.text().startswith("Saved the defaults for other.gguf"), timeout=WAIT_MS)
    shell.settled()
    saved = library.defaults_for(shell.models_dir / "other.gguf")
    assert (saved.speculative, saved.draft_model) == ("draft", str(shell.models_dir / "main.gguf"))


def test_a_vision_projector_is_chosen_in_a_dialog_and_saved_as_a_default(shell, qtbot, tmp_path):
    """The projector's file dialog is opened with open() (no nested loop); a missing file is
    refused in one line."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QFileDialog

    from app.models.library import ModelDefaults, ModelLibrary

    projector = tmp_path / "mmproj-other.gguf"
    projector.write_bytes(b"GGUF" + bytes(60))
    _win, view = open_library(shell)
    view.select("other.gguf")
    assert view.mmproj.text() == "" and "sees no images" in view.mmproj.placeholderText()
    qtbot.mouseClick(view.mmproj_button, Qt.MouseButton.LeftButton)
    dialog = view.mmproj_dialog
    assert isinstance(dialog, QFileDialog) and dialog.isVisible()
    dialog.selectFile(str(projector))
    dialog.accept()
    qtbot.waitUntil(lambda: view.mmproj.text() == str(projector))
    qtbot.mouseClick(view.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.message.text().startswith("Saved the defaults for other.gguf"), timeout=WAIT_MS)
    shell.settled()
    library = ModelLibrary(shell.db, shell.models_dir)
    assert library.defaults_for(shell.models_dir / "other.gguf") == ModelDefaults(mmproj=str(projector))

    view.select("main.gguf")
    assert view.mmproj.text() == ""
    view.select("other.gguf")
    qtbot.waitUntil(lambda: view.mmproj.text() == str(projector), timeout=WAIT_MS)
    view.mmproj.setText(str(tmp_path / "gone.gguf"))
    view.set_message("")
    qtbot.mouseClick(view.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "no vision projector file at" in view.message.text(), timeout=WAIT_MS)
    assert library.defaults_for(shell.models_dir / "other.gguf") == ModelDefaults(mmproj=str(projector))


def test_bad_defaults_are_one_line_and_nothing_is_saved(shell, qtbot):
    from app.models.library import ModelDefaults, ModelLibrary

    _win, view = open_library(shell)
    view.select("other.gguf")
    view.chat_template.setPlainText("{% for m in messages %}")  # never closed
    view.save_button.click()
    qtbot.waitUntil(lambda: bool(view.message.text()) and "Saved" not in view.message.text(), timeout=WAIT_MS)
    assert "\n" not in view.message.text() and "Traceback" not in view.message.text()
    assert ModelLibrary(shell.db, shell.models_dir).defaults_for(shell.models_dir / "other.gguf") == ModelDefaults()


def test_an_unreachable_hub_is_one_line_in_discover_and_the_library_still_works(shell, qtbot, monkeypatch):
    from huggingface_hub import constants as hf_constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    win = shell.open()
    qtbot.waitUntil(lambda: "No connection to the Hugging Face Hub" in win.discover_message.text(), timeout=WAIT_MS)
    assert win.discover_message.isVisible() and "\n" not in win.discover_message.text()
    assert win.results.repo_ids() == []
    win.show_library()
    qtbot.waitUntil(lambda: "other.gguf" in shell.library_names(), timeout=WAIT_MS)


def test_offline_mode_says_why_discover_is_empty_and_the_library_still_works(shell, qtbot):
    win = shell.open()
    qtbot.waitUntil(lambda: "HF_HUB_OFFLINE" in win.discover_message.text(), timeout=WAIT_MS)
    assert "\n" not in win.discover_message.text()
    win.results.search_box.setText("smollm")
    win.results.search_now()  # asking again says the same, once
    qtbot.waitUntil(lambda: "HF_HUB_OFFLINE" in win.discover_message.text(), timeout=WAIT_MS)
    win.show_library()
    qtbot.waitUntil(lambda: "other.gguf" in shell.library_names(), timeout=WAIT_MS)



def test_the_window_opens_from_the_file_menu_its_shortcut_and_the_model_picker(shell, qtbot):
    from PySide6.QtGui import QAction, QKeySequence

    window = shell.window
    action = next(a for a in window.findChildren(QAction) if a.text() == "Models…")
    assert action.shortcut() == QKeySequence("Ctrl+Shift+M")
    file_menu = window.menuBar().actions()[0].menu()
    assert action in file_menu.actions()
    action.trigger()
    win = shell.models.window
    qtbot.waitUntil(win.isVisible)
    assert not win.isModal()  # beside the chats, not over them
    win.close()
    assert not win.isVisible()

    browse = next(a for a in window.model_picker.menu.actions() if a.text() == "Browse models…")
    browse.trigger()
    qtbot.waitUntil(win.isVisible)
    assert shell.models.window is win  # the same window, as it was left


def test_a_model_whose_file_is_gone_is_listed_missing_and_can_be_forgotten(shell, qtbot):
    from app.models.library import ModelLibrary

    path = shell.models_dir / "elsewhere.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    ModelLibrary(shell.db, shell.models_dir).record_local(path)
    path.unlink()
    _win, view = open_library(shell)
    qtbot.waitUntil(lambda: "elsewhere.gguf" in view.names(), timeout=WAIT_MS)
    view.select("elsewhere.gguf")
    assert view.list.currentItem().text(0) == "elsewhere.gguf  (missing)" and view.list.currentItem().text(1) == "—"
    assert not view.load_button.isEnabled() and view.delete_button.isEnabled()
    view.delete_button.click()
    assert "Forget elsewhere.gguf" in view.delete_box.text()
    view.delete_box.button(QMessageBox.StandardButton.Yes).click()
    qtbot.waitUntil(lambda: "elsewhere.gguf" not in view.names(), timeout=WAIT_MS)
