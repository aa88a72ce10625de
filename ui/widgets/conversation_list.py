"""The sidebar's list of chats and comparisons: pinned first, a context menu to open,
rename, pin and delete, and a click to open."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QInputDialog, QListWidget, QListWidgetItem, QMenu

COMPARE_MARK = "⚖ "
PIN_MARK = "⚑ "  # in DejaVu Sans and most UI fonts; the emoji pin drew as a box without an emoji font
PINNED_ROLE = Qt.ItemDataRole.UserRole + 1
TITLE_ROLE = Qt.ItemDataRole.UserRole + 2
COMPARISON_ROLE = Qt.ItemDataRole.UserRole + 3


@dataclass(frozen=True, slots=True)
class ConversationItem:
    id: int
    title: str
    pinned: bool = False
    subtitle: str = ""
    comparison: bool = False  # a comparison (id is its id), opened as a compare view


class ConversationList(QListWidget):
    open_requested = Signal(int)
    rename_requested = Signal(int, str)
    pin_requested = Signal(int, bool)
    delete_requested = Signal(int)
    open_comparison_requested = Signal(int)
    rename_comparison_requested = Signal(int, str)
    delete_comparison_requested = Signal(int)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSpacing(2)
        self.itemActivated.connect(self._open_item)
        self.itemClicked.connect(self._open_item)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._menu)

    def set_items(self, items: list[ConversationItem]) -> None:
        self.clear()
        for item in items:
            mark = COMPARE_MARK if item.comparison else PIN_MARK if item.pinned else ""
            row = QListWidgetItem(mark + (item.title or ("Comparison" if item.comparison else "New chat")))
            row.setData(Qt.ItemDataRole.UserRole, item.id)
            row.setData(COMPARISON_ROLE, item.comparison)
            row.setData(PINNED_ROLE, item.pinned)
            row.setData(TITLE_ROLE, item.title)
            if item.subtitle:
                row.setToolTip(item.subtitle)
            self.addItem(row)

    def _open_item(self, item: QListWidgetItem) -> None:
        ident = int(item.data(Qt.ItemDataRole.UserRole))
        (self.open_comparison_requested if item.data(COMPARISON_ROLE) else self.open_requested).emit(ident)

    def _menu(self, pos) -> None:
        item = self.itemAt(pos)
        if item is None:
            return
        ident = int(item.data(Qt.ItemDataRole.UserRole))
        comparison = bool(item.data(COMPARISON_ROLE))
        menu = QMenu(self)
        menu.addAction("Open", lambda: self._open_item(item))
        menu.addAction("Rename…", lambda: self._ask_rename(ident, item.data(TITLE_ROLE), comparison))
        if not comparison:
            pinned = bool(item.data(PINNED_ROLE))
            menu.addAction("Unpin" if pinned else "Pin", lambda: self.pin_requested.emit(ident, not pinned))
        menu.addSeparator()
        delete = self.delete_comparison_requested if comparison else self.delete_requested
        menu.addAction("Delete", lambda: delete.emit(ident))
        menu.popup(self.viewport().mapToGlobal(pos))

    def _ask_rename(self, ident: int, title: str, comparison: bool) -> QInputDialog:
        """open(), not the static getText: no nested event loop while the user types."""
        dialog = QInputDialog(self)
        dialog.setWindowTitle("Rename")
        dialog.setLabelText("Title:")
        dialog.setTextValue(title or "")
        dialog.finished.connect(dialog.deleteLater)
        renamed = self.rename_comparison_requested if comparison else self.rename_requested
        dialog.textValueSelected.connect(lambda new: renamed.emit(ident, new.strip()) if new.strip() else None)
        dialog.open()
        return dialog
