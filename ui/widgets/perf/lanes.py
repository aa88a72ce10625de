"""The performance panel's lanes: who uses the engine (a tab's chat, an API client, a job, the
chats' titles), one row each with its tokens per second, rows in the batch, share of the KV
cache and requests waiting, from the engine's snapshot (MetricsSnapshot.lanes).

A tile among the charts, in the first slot: it never moves them. A lane stays LINGER_S after
its owner last had a request in the engine, so a chat between two replies does not blink
in and out; then its row goes."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ui.widgets.perf.chart import CHART_H, MIN_CHART_W

LINGER_S = 3.0
KINDS = ("chat", "api", "job", "title", "other")  # the engine's order (inference/owner.py)
COLUMNS = (("kind", "what it is: a tab's chat, an API client, a job, the chats' titles"),
           ("name", "the chat's title, the API client's user agent, the job's id"),
           ("tok/s", "tokens generated per second over the last 5 s"),
           ("rows", "its sequences in the batch"),
           ("KV", "its share of the KV cache (a prefix shared with others counts for each)"),
           ("queue", "its requests waiting for a sequence"))
NUMBERS = range(2, len(COLUMNS))
IDLE_TEXT = "No tab, API client or job is using it"  # under "Lanes · who uses the engine"


@dataclass
class _Shown:
    texts: tuple[str, ...]
    active_s: float  # when its owner last had a request in the engine


class LanesTable(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("<b>Lanes</b> · who uses the engine")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("perfLanes")
        for i, (name, tip) in enumerate(COLUMNS):
            item = QTableWidgetItem(name)
            item.setToolTip(tip)
            self.table.setHorizontalHeaderItem(i, item)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setHighlightSections(False)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.table.setShowGrid(False)
        self.table.setAlternatingRowColors(True)  # the palette's: readable in both themes
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.idle = QLabel(IDLE_TEXT)
        self.idle.setEnabled(False)  # the palette's dimmed text
        box = QVBoxLayout(self)
        box.setContentsMargins(2, 0, 6, 8)
        box.setSpacing(2)
        box.addWidget(self.title)
        box.addWidget(self.table, 1)
        box.addWidget(self.idle)
        self._shown: dict[tuple[str, str], _Shown] = {}
        self._order: list[tuple[str, str]] = []
        self._gone: set[tuple[str, str]] = set()  # rows taken away that the engine still reports

    def sizeHint(self) -> QSize:
        return QSize(MIN_CHART_W, CHART_H)

    def show_lanes(self, snapshot, now: float) -> None:
        """The lanes of `snapshot` (None: an engine not ready, no lanes), at `now` (the
        panel's clock, seconds)."""
        lanes = getattr(snapshot, "lanes", ()) if snapshot is not None else ()
        cells = getattr(snapshot, "kv_cells_total", 0) or 0
        seen = set()
        for lane in lanes:
            key = (lane.kind, lane.name)
            seen.add(key)
            busy = lane.rows or lane.queued
            shown = self._shown.get(key)
            if shown is None and not busy and key in self._gone:
                continue  # its rate still in the engine's window, its row already gone
            self._gone.discard(key)
            self._shown[key] = _Shown(_texts(lane, cells), now if busy or shown is None else shown.active_s)
        self._gone &= seen  # what the engine forgot may come back as new
        for key in list(self._shown):
            shown = self._shown[key]
            if now - shown.active_s > LINGER_S:
                del self._shown[key]
                self._gone.add(key)
            elif key not in seen:  # the engine forgot it: nothing of it left there
                shown.texts = (*shown.texts[:2], "0", "0", "0%", "0")
        self._write(sorted(self._shown, key=_order))

    def _write(self, order: list[tuple[str, str]]) -> None:
        if order != self._order:
            self.table.setRowCount(len(order))
            self._order = order
        for row, key in enumerate(order):
            for column, text in enumerate(self._shown[key].texts):
                item = self.table.item(row, column)
                if item is None:
                    item = QTableWidgetItem(text)
                    if column in NUMBERS:
                        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                    self.table.setItem(row, column, item)
                elif item.text() != text:  # four samples a second: repaint what changed only
                    item.setText(text)
                if column == 1:
                    item.setToolTip(text)
        self.idle.setVisible(not order)

    def rows(self) -> list[tuple[str, ...]]:
        """The rows shown, as their texts (kind, name, tok/s, rows, KV, queue)."""
        return [self._shown[key].texts for key in self._order]


def _texts(lane, cells_total: int) -> tuple[str, ...]:
    share = 100.0 * lane.kv_cells / cells_total if cells_total else 0.0
    return (lane.kind, lane.name or "—", f"{lane.tok_s:.1f}" if lane.tok_s < 10 else f"{lane.tok_s:.0f}",
            str(lane.rows), f"{share:.0f}%" if share >= 1 or not lane.kv_cells else "<1%", str(lane.queued))


def _order(key: tuple[str, str]) -> tuple[int, str]:
    kind, name = key
    return (KINDS.index(kind) if kind in KINDS else len(KINDS), name)
