"""File dialogs opened with open() and a signal, never the static getOpenFileName /
getSaveFileName: those run a nested event loop, which stalls qasync's tasks (streaming,
storage hops) for as long as the dialog is up."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QFileDialog, QWidget


def open_file_dialog(parent: QWidget, caption: str, filters: str, chosen: Callable[[str, str], None],
                     directory: str = "", save: bool = False, default_suffix: str = "") -> QFileDialog:
    """A window-modal file dialog; chosen(path, selected filter) when the user accepts.
    Returns the dialog (already open), for tests and for callers that keep a handle."""
    dialog = QFileDialog(parent, caption, directory, filters)
    dialog.finished.connect(dialog.deleteLater)  # one per use, not one per use kept
    if save:
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setFileMode(QFileDialog.FileMode.AnyFile)
        if default_suffix:
            dialog.setDefaultSuffix(default_suffix)
    else:
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
    # The filter is tracked by signal: a slot holding the dialog itself crashed PySide once
    # the dialog deleted itself on close.
    picked = [dialog.selectedNameFilter()]
    dialog.filterSelected.connect(lambda name: picked.__setitem__(0, name))
    dialog.fileSelected.connect(lambda path: chosen(path, picked[0]) if path else None)
    dialog.open()
    return dialog


def open_files_dialog(parent: QWidget, caption: str, filters: str,
                      chosen: Callable[[list[str]], None], directory: str = "") -> QFileDialog:
    """A window-modal dialog for one or more existing files; chosen(paths) when accepted."""
    dialog = QFileDialog(parent, caption, directory, filters)
    dialog.finished.connect(dialog.deleteLater)
    dialog.setFileMode(QFileDialog.FileMode.ExistingFiles)
    dialog.filesSelected.connect(lambda paths: chosen(list(paths)) if paths else None)
    dialog.open()
    return dialog


def open_folder_dialog(parent: QWidget, caption: str, chosen: Callable[[str], None],
                       directory: str = "") -> QFileDialog:
    """A window-modal dialog for an existing folder; chosen(path) when accepted."""
    dialog = QFileDialog(parent, caption, directory)
    dialog.finished.connect(dialog.deleteLater)
    dialog.setFileMode(QFileDialog.FileMode.Directory)
    dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
    dialog.fileSelected.connect(lambda path: chosen(path) if path else None)
    dialog.open()
    return dialog
