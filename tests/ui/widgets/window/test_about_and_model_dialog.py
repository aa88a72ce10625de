"""Help → About Chorus and File → Open model…, offscreen with pytest-qt; the model dialog's
estimate comes from the real GGUF file of the default model."""

from __future__ import annotations

import sqlite3
import sys

import pytest

from app.about import chorus_version, gather_about
from app.models.probe import ModelProbe
from inference import BackendInfo, backend
from inference.params import LoadSettings
from tests.support.paths import ROOT

pytest.importorskip("PySide6")

WAIT_MS = 10_000


def pyproject_version() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


# ----- About -------------------------------------------------------------------------------


def test_about_gathers_the_versions_without_qt(tmp_path) -> None:
    build = backend.backend_info()  # what the engine reports: the window's process loads no llama.cpp
    info = gather_about(tmp_path, build)
    assert info.chorus == chorus_version() == pyproject_version()
    assert info.sqlite == sqlite3.sqlite_version
    assert info.python.startswith(f"{sys.version_info.major}.{sys.version_info.minor}.")
    assert info.backend.llama_cpp_python == backend.llama_cpp_python_version() != "unknown"
    assert info.backend.system_info.startswith("CPU :")  # llama.cpp's own summary of its build
    assert info.backend.gpu_offload is backend.gpu_offload_supported()
    assert info.data_dir == tmp_path and info.frozen is False
    labels = [label for label, _ in info.rows(qt_version="6.9.9")]
    assert labels == ["Chorus", "llama.cpp", "GPU offload", "llama.cpp build", "Qt", "SQLite", "Python", "Data folder"]
    assert dict(info.rows(qt_version="6.9.9"))["Qt"] == f"6.9.9 (PySide6 {info.pyside6})"
    before_an_engine = dict(gather_about(tmp_path, None).rows())
    assert before_an_engine["llama.cpp"] == "not known yet: no local model has loaded"
    assert "GPU offload" not in before_an_engine


def test_about_dialog_shows_every_version_and_the_data_folder(qtbot, tmp_path) -> None:
    from PySide6 import __version__ as pyside_version
    from PySide6.QtCore import qVersion

    from ui.widgets.window.about_dialog import AboutDialog

    dialog = AboutDialog(gather_about(tmp_path, backend.backend_info()))
    qtbot.addWidget(dialog)
    dialog.show()
    shown = {label: w.text() for label, w in dialog.values.items()}
    assert shown["Chorus"] == pyproject_version()
    assert shown["Qt"] == f"{qVersion()} (PySide6 {pyside_version})"
    assert shown["SQLite"] == sqlite3.sqlite_version
    assert shown["Data folder"] == str(tmp_path)
    assert "llama-cpp-python" in shown["llama.cpp"]
    assert shown["GPU offload"] == ("yes" if backend.gpu_offload_supported() else "no (CPU only)")


def test_help_menu_asks_for_about(qtbot) -> None:
    from ui.widgets.window.main_window import MainWindow

    window = MainWindow()
    qtbot.addWidget(window)
    menus = {a.text(): a.menu() for a in window.menuBar().actions()}
    [about] = [a for a in menus["&Help"].actions() if a.text() == "About Chorus"]
    with qtbot.waitSignal(window.about_requested, timeout=WAIT_MS):
        about.trigger()


def test_the_window_icon_loads_from_the_package(qapp) -> None:
    from ui.icon import ICON_PNG, ICON_SVG, app_icon

    assert ICON_PNG.is_file() and ICON_SVG.is_file()
    icon = app_icon()
    assert not icon.isNull()
    image = icon.pixmap(64, 64).toImage()
    assert image.width() == 64
    assert image.pixelColor(32, 4).alpha() > 200  # the rounded square is drawn, not empty


# ----- the model dialog ----------------------------------------------------------------------


@pytest.fixture
def probe(model_path) -> ModelProbe:
    return ModelProbe(lambda: LoadSettings(model_path=model_path, n_ctx=4096), backend.backend_info)


def open_dialog(qtbot, probe, path: str = ""):
    from ui.widgets.models.model_dialog import ModelDialog

    dialog = ModelDialog(probe, path=path)
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


@pytest.mark.model
def test_the_dialog_shows_the_estimate_of_the_chosen_file(qtbot, probe, model_path) -> None:
    from ui.widgets.models.model_dialog import format_bytes

    dialog = open_dialog(qtbot, probe)
    dialog.path_edit.setText(str(model_path))
    qtbot.waitUntil(lambda: "Estimated memory" in dialog.estimate_label.text(), timeout=WAIT_MS)
    expected = probe.estimate(model_path)
    text = dialog.estimate_label.text()
    assert f"Estimated memory: {format_bytes(expected.total_bytes)}" in text
    assert f"KV cache: {format_bytes(expected.kv_bytes)} (4096 tokens, f16)" in text
    assert "Weights: 92.1 MiB (30 layers)" in text  # llama.cpp logs 92.10 MiB for this file


def test_sizes_read_like_a_person_writes_them() -> None:
    from ui.widgets.models.model_dialog import format_bytes

    assert [format_bytes(n) for n in (512, 1536, 96576768, 5 * 2**30)] == ["512 B", "1.5 KiB", "92.1 MiB", "5.0 GiB"]


@pytest.mark.model
def test_without_gpu_support_the_layers_are_disabled_with_a_note(qtbot, probe) -> None:
    from ui.widgets.models.model_dialog import NO_GPU_NOTE

    if backend.gpu_offload_supported():
        pytest.skip("this llama.cpp build has GPU support")
    dialog = open_dialog(qtbot, probe)
    assert not dialog.gpu_layers.isEnabled()
    assert dialog.gpu_note.text() == NO_GPU_NOTE == "This llama.cpp build has no GPU support (CPU only)"
    assert dialog.chosen_layers() is None


@pytest.mark.model
def test_with_gpu_support_the_layers_change_the_gpu_share(qtbot, model_path) -> None:
    cuda = BackendInfo("b9999", "0.3.36", "CUDA : ARCHS = 900", gpu_offload=True)  # as a CUDA engine reports it
    dialog = open_dialog(qtbot, ModelProbe(lambda: LoadSettings(model_path=model_path, n_ctx=4096), lambda: cuda),
                         str(model_path))
    assert dialog.gpu_layers.isEnabled()
    qtbot.waitUntil(lambda: "On the GPU (31 layers)" in dialog.estimate_label.text(), timeout=WAIT_MS)
    assert dialog.gpu_layers.maximum() == 31  # 30 blocks and the output layer
    dialog.gpu_layers.setValue(10)
    qtbot.waitUntil(lambda: "On the GPU (10 layers)" in dialog.estimate_label.text(), timeout=WAIT_MS)
    assert dialog.chosen_layers() == 10


@pytest.mark.model
def test_a_file_that_is_not_gguf_says_why(qtbot, probe, tmp_path) -> None:
    notes = tmp_path / "notes.gguf"
    notes.write_text("just some notes")
    dialog = open_dialog(qtbot, probe, str(notes))
    qtbot.waitUntil(lambda: "Cannot estimate" in dialog.estimate_label.text(), timeout=WAIT_MS)
    assert "not a GGUF model file" in dialog.estimate_label.text()
    dialog.path_edit.setText(str(tmp_path / "missing.gguf"))
    from PySide6.QtWidgets import QDialogButtonBox

    assert not dialog.buttons.button(QDialogButtonBox.StandardButton.Open).isEnabled()


@pytest.mark.model
def test_open_emits_the_path_and_the_layers(qtbot, probe, model_path) -> None:
    dialog = open_dialog(qtbot, probe, str(model_path))
    with qtbot.waitSignal(dialog.model_chosen, timeout=WAIT_MS) as chosen:
        dialog.buttons.button(dialog.buttons.StandardButton.Open).click()
    assert chosen.args == [str(model_path), -1]  # -1: the default number of layers


@pytest.mark.model
def test_file_open_model_opens_the_dialog_with_the_window_probe(qtbot, probe) -> None:
    from ui.widgets.models.model_dialog import ModelDialog
    from ui.widgets.window.main_window import MainWindow

    window = MainWindow()
    qtbot.addWidget(window)
    window.model_probe = probe
    menus = {a.text(): a.menu() for a in window.menuBar().actions()}
    [open_model] = [a for a in menus["&File"].actions() if a.text() == "Open model…"]
    open_model.trigger()
    qtbot.waitUntil(lambda: any(isinstance(w, ModelDialog) and w.isVisible() for w in window.findChildren(ModelDialog)),
                    timeout=WAIT_MS)
    [dialog] = window.findChildren(ModelDialog)
    assert dialog.probe is probe
    with qtbot.waitSignal(window.model_load_requested, timeout=WAIT_MS) as asked:
        dialog.model_chosen.emit("/models/x.gguf", 7)
    assert asked.args == ["/models/x.gguf", 7]
