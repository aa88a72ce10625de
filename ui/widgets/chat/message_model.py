"""The messages of one tab as a Qt list model: a streaming reply updates one row only."""

from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt

from storage import AttachmentRecord, SourceRecord

ViewRole = Qt.ItemDataRole.UserRole + 1


# A tool call's state, as its chip says it (the words are the chip's).
QUEUED = "queued"  # behind another call of the same turn
APPROVAL = "waiting for approval"
RUNNING = "running"
DONE = "done"
FAILED = "failed"
NOT_RUN = "not run"  # denied, or stopped before it ran
STOPPED = "stopped"  # given up while it ran
LIVE_STATES = (APPROVAL, RUNNING)  # said by the tool loop, not by storage
# A call of a turn whose calls run at once may end before an earlier one: its chip says so
# (DONE, FAILED, NOT_RUN with "denied") while its stored row waits for the earlier one's.


@dataclass(frozen=True, slots=True)
class ToolCallView:
    """One call of an assistant turn: a chip in that reply's bubble. Its state comes from
    the call's stored result (the "tool" row that answers it) or, while the loop is at it,
    from the model's live states (waiting for approval, running)."""

    call_id: str
    name: str
    arguments: str  # the call's JSON arguments
    state: str = QUEUED
    took: str = ""  # "0.25 s": how long it ran
    note: str = ""  # "denied", "4,900 characters cut"
    result: str | None = None  # the result's text, once stored
    since: float | None = None  # a running call: when it started (time.monotonic)
    result_id: int | None = None  # the stored "tool" message of its result (a search hit on it)


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
    calls: tuple[ToolCallView, ...] = ()  # an assistant turn that called tools: a chip each


class MessageListModel(QAbstractListModel):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[MessageView] = []
        self._index: dict[str, int] = {}
        # Calls the tool loop is at (call id -> state, since, took, note): kept over
        # set_messages, as storage does not know them (a redrawn branch still shows the call
        # waiting).
        self._live: dict[str, tuple[str, float | None, str, str]] = {}

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
        if role == Qt.ItemDataRole.AccessibleTextRole and view.calls:  # what a screen reader says of the row
            return "\n".join([view.text, *(", ".join(p for p in (f"tool call {c.name}", c.state, c.took, c.note) if p)
                                            for c in view.calls)]).strip()
        return None

    def view(self, row: int) -> MessageView:
        return self._rows[row]

    def views(self) -> list[MessageView]:
        return list(self._rows)

    def set_messages(self, views: list[MessageView]) -> None:
        self.beginResetModel()
        self._rows = [self._with_live(v) for v in views]
        self._reindex()
        self.endResetModel()

    def append(self, view: MessageView) -> int:
        row = len(self._rows)
        self.beginInsertRows(QModelIndex(), row, row)
        self._rows.append(self._with_live(view))
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

    def set_call_state(self, call_id: str, state: str | None, since: float | None = None, took: str = "",
                       note: str = "") -> None:
        """A call the loop is at (LIVE_STATES), or how it ended before its result is stored
        (took, note: as a stored one's), or None once the loop is done with it; the row
        holding it shows it at once."""
        live = (state, since, took, note) if state is not None else None
        if live is None:
            self._live.pop(call_id, None)
        else:
            self._live[call_id] = live
        for view in self._rows:
            if any(c.call_id == call_id for c in view.calls):
                self.update(view.key, calls=self._live_calls(view.calls, call_id, live))
                return

    def clear_call_states(self) -> None:
        for call_id in list(self._live):
            self.set_call_state(call_id, None)

    def _with_live(self, view: MessageView) -> MessageView:
        if not self._live or not view.calls:
            return view
        calls = view.calls
        for call_id, live in self._live.items():
            calls = self._live_calls(calls, call_id, live)
        return replace(view, calls=calls)

    @staticmethod
    def _live_calls(calls: tuple[ToolCallView, ...], call_id: str,
                    live: tuple[str, float | None, str, str] | None) -> tuple[ToolCallView, ...]:
        """calls with call_id's state live (None: back to queued), unless its result is stored."""
        state, since, took, note = live if live is not None else (QUEUED, None, "", "")
        return tuple(replace(c, state=state, since=since, took=took, note=note)
                     if c.call_id == call_id and c.result is None else c for c in calls)

    def _reindex(self) -> None:
        self._index = {v.key: i for i, v in enumerate(self._rows)}
