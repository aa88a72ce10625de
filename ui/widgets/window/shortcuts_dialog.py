"""Help → Keyboard shortcuts: every shortcut of the window, read from its QActions when the
dialog opens (so the list cannot go stale), grouped by the menu each action is in."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QMenuBar,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)


@dataclass(frozen=True, slots=True)
class ShortcutRow:
    menu: str  # "File", "View → Theme", or "" for an action outside the menus
    action: str
    keys: str  # every key sequence of the action, in the platform's notation


# The composer's own keys (its keyPressEvent, not actions): listed too, as people look for them.
COMPOSER_ROWS = (ShortcutRow("Composer", "Send", "Enter"), ShortcutRow("Composer", "New line", "Shift+Enter"))


def shortcut_rows(menu_bar: QMenuBar, actions: list[QAction]) -> list[ShortcutRow]:
    """One row per action (an action in two menus is listed once), in menu order."""
    where: dict[QAction, str] = {}

    def walk(menu_actions: list[QAction], path: str) -> None:
        for action in menu_actions:
            menu = action.menu()
            if menu is not None:
                walk(menu.actions(), f"{path} → {_plain(menu.title())}" if path else _plain(menu.title()))
            elif action not in where:
                where[action] = path

    walk(menu_bar.actions(), "")
    order = {action: i for i, action in enumerate(where)}
    rows = []
    seen = set()
    for action in sorted(actions, key=lambda a: order.get(a, len(order))):
        keys = ", ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in action.shortcuts()
                         if typed(k))
        row = ShortcutRow(where.get(action, ""), _plain(action.text()), keys)
        if keys and (row.action, keys) not in seen:
            seen.add((row.action, keys))
            rows.append(row)
    return rows + list(COMPOSER_ROWS)


def typed(keys: QKeySequence) -> bool:
    """A sequence typed on the keyboard's own keys: not a media key such as the platform's
    "Close" (Close tab listed "Ctrl+W, Close", read as Ctrl+W doing Close; issue 39, defect 11)."""
    return keys.count() > 0 and keys[0].key().value < Qt.Key.Key_Back.value


def _plain(text: str) -> str:
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&")


class ShortcutsDialog(QDialog):
    def __init__(self, rows: list[ShortcutRow], parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.setModal(False)
        self.table = QTableWidget(len(rows), 3)
        self.table.setHorizontalHeaderLabels(["Menu", "Action", "Shortcut"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
        for i, row in enumerate(rows):
            for j, text in enumerate((row.menu, row.action, row.keys)):
                self.table.setItem(i, j, QTableWidgetItem(text))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        box = QVBoxLayout(self)
        box.addWidget(self.table)
        box.addWidget(buttons)
        self.resize(520, 480)

    def rows(self) -> list[tuple[str, str, str]]:
        return [tuple(self.table.item(i, j).text() for j in range(3)) for i in range(self.table.rowCount())]
