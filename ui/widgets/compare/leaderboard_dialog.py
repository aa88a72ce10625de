"""Chat → Blind leaderboard…: the standings of every model and preset picked in blind mode
(app/compare/leaderboard.py), in a window that stays open beside the chats."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from app.compare.leaderboard import Standing

COLUMNS = ("Rank", "Model · preset", "Picked", "Blind rounds", "Share")
EMPTY = ("No blind picks yet. In a comparison, tick Blind, ask, and pick your favourite: "
         "each pick counts here for its model and preset over the others shown beside it.")


class LeaderboardDialog(QDialog):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Blind leaderboard")
        self.resize(560, 360)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setAccessibleName("Standings")
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.table)
        self.show_standings([], 0)

    def show_standings(self, table: list[Standing], picks: int) -> None:
        self.table.setVisible(bool(table))
        self.summary.setText(EMPTY if not table else
                             f"{picks} blind pick{'s' if picks != 1 else ''}. A tie shares its rank.")
        self.table.setRowCount(len(table))
        for row, standing in enumerate(table):
            cells = (str(standing.rank), standing.contender, str(standing.wins), str(standing.rounds),
                     f"{standing.share:.0%}")
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if column != 1:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, column, item)
        self.table.setCurrentCell(-1, -1)  # no cell framed as if chosen

    def rows(self) -> list[tuple[str, ...]]:
        """What the table shows, row by row (for tests and the accessibility walk)."""
        return [tuple(_text(self.table.item(r, c)) for c in range(len(COLUMNS))) for r in range(self.table.rowCount())]


def _text(item: QTableWidgetItem | None) -> str:
    return item.text() if item is not None else ""
