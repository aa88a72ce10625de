"""The messages of one tab as a Qt list model: a streaming reply updates one row only."""

from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt

from storage import AttachmentRecord, SourceRecord

ViewRole = Qt.ItemDataRole.UserRole + 1


@dataclass(frozen=True, slots=True)
class ToolCard:
    """A tool message's card: the call it answers and what came back. state: the card's
    header after the tool's name ("0.25 s", "error · 0.25 s", "denied")."""

    name: str
    arguments: str  # the call's JSON arguments
    result: str
    state: str = ""


@dataclass(frozen=True, slots=True)
class MessageView:
    """What a row shows; built by the controller from storage records and deltas."""

    key: str  # stable identity of the row (storage id or a pending request id)
    role: str  # user | assistant | system | tool
    text: str
    status: str = "complete"  # complete | streaming | interrupted | error | queued | prefilling
    meta: str = ""  # "0.12 s to first token · 118 tok/s"
    branch: tuple[int, int] | None = None  # (index, count) among siblings when count > 1
    message_id: int | None = None
    thought_s: float | None = None  # how long a reasoning reply thought (app/chats/reasoning.py)
    attachments: tuple[AttachmentRecord, ...] = ()  # a user message's documents: a chip each
    sources: tuple[SourceRecord, ...] = ()  # the excerpts a reply was shown: its citation chips
    calls: tuple[tuple[str, str], ...] = ()  # an assistant turn that called tools: (name, arguments)
    tool: ToolCard | None = None  # a tool message: its collapsible card


class MessageListModel(QAbstractListModel):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[MessageView] = []
        self._index: dict[str, int] = {}

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        view = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return view.text
        if role == ViewRole:
            return view
        return None

    def view(self, row: int) -> MessageView:
        return self._rows[row]

    def views(self) -> list[MessageView]:
        return list(self._rows)

    def set_messages(self, views: list[MessageView]) -> None:
        self.beginResetModel()
        self._rows = list(views)
        self._reindex()
        self.endResetModel()

    def append(self, view: MessageView) -> int:
        row = len(self._rows)
        self.beginInsertRows(QModelIndex(), row, row)
        self._rows.append(view)
        self._index[view.key] = row
        self.endInsertRows()
        return row

    def update(self, key: str, **changes) -> None:
        """Change one row in place (new text, status, meta); views repaint only that row."""
        row = self._index.get(key)
        if row is None:
            return
        self._rows[row] = replace(self._rows[row], **changes)
        if "key" in changes:
            self._reindex()
        index = self.index(row)
        self.dataChanged.emit(index, index)

    def append_text(self, key: str, text: str, **changes) -> None:
        row = self._index.get(key)
        if row is not None:
            self.update(key, text=self._rows[row].text + text, **changes)

    def _reindex(self) -> None:
        self._index = {v.key: i for i, v in enumerate(self._rows)}
