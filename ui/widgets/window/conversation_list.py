"""The sidebar's list of chats and comparisons: pinned first, then the chat folders (each
under its own header, which a click folds and unfolds), then by date under headers (Today,
Yesterday, Last 7 days, Older), then the conversations clients had with the server's
Responses API (a group folded at first: a batch may add thousands); search hits with their
snippet; what a chat is doing (writing and its rate, an unread reply); a context menu to open, rename, pin, move to a
folder and delete, and a click to open."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from PySide6.QtCore import QEvent, QModelIndex, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QInputDialog, QLabel, QLineEdit, QListWidget, QListWidgetItem, QMenu

from ui.widgets.window.sidebar_delegate import ACTIVITY_ROLE, HEADER_ROLE, SNIPPET_ROLE, SidebarDelegate
from ui.widgets.window.tab_activity import READY, Activity

COMPARE_MARK = "⚖ "
PIN_MARK = "⚑ "  # in DejaVu Sans and most UI fonts; the emoji pin drew as a box without an emoji font
PINNED_ROLE = Qt.ItemDataRole.UserRole + 1
TITLE_ROLE = Qt.ItemDataRole.UserRole + 2
COMPARISON_ROLE = Qt.ItemDataRole.UserRole + 3
PINNED_GROUP = "Pinned"
FOLDER_ROLE = Qt.ItemDataRole.UserRole + 4  # on a folder's header: its name
OPEN_MARK, FOLDED_MARK = "▾ ", "▸ "  # a folder's header, unfolded or folded
API_GROUP = "From the API"
# The API group's key among the folded groups: no folder name (a user's folder may be
# called "From the API" too) can be this.
API_GROUP_KEY = "\x00api"


@dataclass(frozen=True, slots=True)
class ConversationItem:
    id: int
    title: str
    pinned: bool = False
    subtitle: str = ""
    comparison: bool = False  # a comparison (id is its id), opened as a compare view
    updated_at: datetime | None = None  # the date group; search hits have none (they are ranked)
    snippet: tuple[tuple[str, bool], ...] = ()  # a search hit's (text, matched) runs
    folder: str = ""  # the chat folder it is filed in ("": none)
    from_api: bool = False  # a conversation a client had with the server (a stored Response)

    @property
    def group_key(self) -> str:
        """The foldable group it is listed in: its folder's name, the API's key, or ""."""
        if self.pinned:
            return ""
        return self.folder or (API_GROUP_KEY if self.from_api else "")


def date_group(when: datetime, now: datetime) -> str:
    """The header a chat last changed at `when` goes under, in the local calendar."""
    days = (now.astimezone().date() - when.astimezone().date()).days
    if days <= 0:
        return "Today"
    if days == 1:
        return "Yesterday"
    return "Last 7 days" if days < 7 else "Older"


RENAME_W = 420  # the rename dialog: a long title fits (Qt's default was a couple of words wide)


NO_CHATS_YET = "No chats yet.\nCtrl+N starts one; each chat you send is kept here."


class ConversationList(QListWidget):
    open_requested = Signal(int)
    open_match_requested = Signal(int, str)  # a search hit: the chat and the words searched
    rename_requested = Signal(int, str)
    pin_requested = Signal(int, bool)
    delete_requested = Signal(int)
    open_comparison_requested = Signal(int)
    rename_comparison_requested = Signal(int, str)
    delete_comparison_requested = Signal(int)
    folder_requested = Signal(int, str)  # a chat moved into a folder ("": out of its folder)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSpacing(2)
        self.setItemDelegate(SidebarDelegate(self))
        self.itemActivated.connect(self._open_item)
        self.itemClicked.connect(self._open_item)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._menu)
        # What each chat does, kept across refills: (is a comparison, id) -> activity.
        self._activity: dict[tuple[bool, int], Activity] = {}
        # The rows by (is a comparison, id): the 2 Hz activity updates look them up without a scan.
        self._rows: dict[tuple[bool, int], QListWidgetItem] = {}
        self._query = ""  # the search the rows are hits of ("": the chats by date)
        # The groups whose chats are hidden (folders by name, the API's by its key), kept over refills.
        self.folded: set[str] = {API_GROUP_KEY}
        self.folders: list[str] = []  # the folders listed, for the context menu
        self.empty_label = QLabel(self.viewport())
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)
        self.empty_label.setEnabled(False)  # the palette's disabled text: a note, not content
        self.empty_label.hide()

    def set_items(self, items: list[ConversationItem], query: str = "", now: datetime | None = None,
                  api_unlisted: int = 0) -> None:
        """Rows in the order given; under group headers unless they are search hits. The row
        selected and the scroll position stay over a refill (a rename or a pin refills it).
        api_unlisted: the older API conversations left out of the list."""
        current, scrolled = self._current_key(), self.verticalScrollBar().value()
        self.clear()
        self._rows = {}
        self._query = query.strip()
        now = now or datetime.now().astimezone()
        group = None
        self.folders = sorted({item.folder for item in items if item.folder}, key=str.lower)
        for item in items:
            if item.updated_at is not None and not query:
                name = self._group_name(item, now)
                if name != group:
                    self.addItem(self._folder_header(item.group_key, self._group_label(item, items, api_unlisted))
                                 if item.group_key else _header(name))
                    group = name
            row = self._rows[(item.comparison, item.id)] = self._row(item)
            self.addItem(row)
            row.setHidden(not query and bool(item.group_key) and item.group_key in self.folded)
        self.empty_label.setText(f"No chats match “{query.strip()}”" if query.strip() else NO_CHATS_YET)
        self.empty_label.setVisible(not items)
        self._place_empty_label()
        if current in self._rows:
            self.setCurrentItem(self._rows[current])
        self.verticalScrollBar().setValue(scrolled)

    @staticmethod
    def _group_name(item: ConversationItem, now: datetime) -> str:
        if item.pinned:
            return PINNED_GROUP
        if item.group_key:  # marked: a folder called "Today" is not the date's group
            return "\x01" + item.group_key
        assert item.updated_at is not None
        return date_group(item.updated_at, now)

    @staticmethod
    def _group_label(item: ConversationItem, items: list[ConversationItem], api_unlisted: int) -> str:
        if item.group_key != API_GROUP_KEY:
            return item.folder
        listed = sum(1 for other in items if other.group_key == API_GROUP_KEY)
        if api_unlisted:
            return f"{API_GROUP} (newest {listed} of {listed + api_unlisted:,})"
        return f"{API_GROUP} ({listed})"

    def _current_key(self) -> tuple[bool, int] | None:
        item = self.currentItem()
        if item is None or item.data(HEADER_ROLE):
            return None
        return bool(item.data(COMPARISON_ROLE)), int(item.data(Qt.ItemDataRole.UserRole))

    def _row(self, item: ConversationItem) -> QListWidgetItem:
        mark = COMPARE_MARK if item.comparison else PIN_MARK if item.pinned else ""
        row = QListWidgetItem(mark + (item.title or ("Comparison" if item.comparison else "New chat")))
        row.setData(Qt.ItemDataRole.UserRole, item.id)
        row.setData(COMPARISON_ROLE, item.comparison)
        row.setData(PINNED_ROLE, item.pinned)
        row.setData(TITLE_ROLE, item.title)
        row.setData(SNIPPET_ROLE, item.snippet)
        row.setData(FOLDER_ROLE, item.folder or None)
        row.setData(ACTIVITY_ROLE, self._activity.get((item.comparison, item.id), READY))
        if item.subtitle:
            row.setToolTip(item.subtitle)
        return row

    def rows(self) -> list[QListWidgetItem]:
        """The chats and comparisons listed, without the headers."""
        every = (self.item(i) for i in range(self.count()))
        return [row for row in every if not row.data(HEADER_ROLE)]

    def titles(self) -> list[str]:
        return [row.text() for row in self.rows()]

    def headers(self) -> list[str]:
        return [self.item(i).text() for i in range(self.count()) if self.item(i).data(HEADER_ROLE)]

    def row_for(self, ident: int, comparison: bool = False) -> QListWidgetItem | None:
        return self._rows.get((comparison, ident))

    def title_of(self, ident: int) -> str:
        row = self.row_for(ident)
        return (row.data(TITLE_ROLE) or "") if row is not None else ""

    def set_activity(self, ident: int, comparison: bool, activity: Activity) -> None:
        """What a row's chat does; a changed value repaints that row only."""
        key = (comparison, ident)
        if activity == READY:
            self._activity.pop(key, None)
        else:
            self._activity[key] = activity
        row = self.row_for(ident, comparison)
        if row is not None and row.data(ACTIVITY_ROLE) != activity:
            row.setData(ACTIVITY_ROLE, activity)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._place_empty_label()

    def _place_empty_label(self) -> None:
        self.empty_label.setGeometry(self.viewport().rect().adjusted(12, 12, -12, -12))

    def _folder_header(self, key: str, label: str) -> QListWidgetItem:
        """A foldable group's header: a folder's (key its name) or the API's."""
        row = _header((FOLDED_MARK if key in self.folded else OPEN_MARK) + label)
        row.setData(FOLDER_ROLE, key)
        row.setData(TITLE_ROLE, label)
        row.setFlags(Qt.ItemFlag.ItemIsEnabled)  # clicked to fold, never selected
        return row

    def toggle_folder(self, header: QListWidgetItem) -> None:
        """Folds the group's chats away, or shows them again."""
        key = header.data(FOLDER_ROLE)
        self.folded ^= {key}
        header.setText((FOLDED_MARK if key in self.folded else OPEN_MARK) + header.data(TITLE_ROLE))
        for index in range(self.row(header) + 1, self.count()):
            row = self.item(index)
            if row.data(HEADER_ROLE):
                break
            row.setHidden(key in self.folded)

    def select(self, ident: int | None, comparison: bool = False) -> None:
        """Marks the row of the chat in front (none: no row); opens nothing."""
        row = self.row_for(ident, comparison) if ident is not None else None
        if row is None:
            self.setCurrentIndex(QModelIndex())
            self.clearSelection()
            return
        self.setCurrentItem(row)
        self.scrollToItem(row)

    def step_current(self, step: int, from_start: bool = False) -> None:
        """The next (or previous) chat row shown becomes the current one: headers and folded
        chats are skipped; from the start (or from no row), a step lands on the first row."""
        shown = [row for row in self.rows() if not row.isHidden()]
        if not shown:
            return
        current = None if from_start else self.currentItem()
        at = shown.index(current) if current in shown else (-1 if step > 0 else len(shown))
        row = shown[max(0, min(len(shown) - 1, at + step))]
        self.setCurrentItem(row)
        self.scrollToItem(row)

    def open_current(self) -> bool:
        """Opens the current row as a click would; False when no chat row is current."""
        item = self.currentItem()
        if item is None or item.data(HEADER_ROLE) or item.isHidden():
            return False
        self._open_item(item)
        return True

    def drive_from(self, search_box: QLineEdit) -> None:
        """Down and Up in the search box move the highlight through the rows, Enter opens
        it, the focus staying in the box (as a launcher's list does)."""
        self._search_keys = _SearchKeys(self, search_box)

    def _open_item(self, item: QListWidgetItem) -> None:
        if item.data(HEADER_ROLE):
            if item.data(FOLDER_ROLE):
                self.toggle_folder(item)
            return
        ident = int(item.data(Qt.ItemDataRole.UserRole))
        if item.data(COMPARISON_ROLE):
            self.open_comparison_requested.emit(ident)
        elif self._query:  # opens at the message that matched, not at the bottom
            self.open_match_requested.emit(ident, self._query)
        else:
            self.open_requested.emit(ident)

    def _menu(self, pos) -> None:
        item = self.itemAt(pos)
        if item is None or item.data(HEADER_ROLE):
            return
        ident = int(item.data(Qt.ItemDataRole.UserRole))
        comparison = bool(item.data(COMPARISON_ROLE))
        menu = QMenu(self)
        menu.addAction("Open", lambda: self._open_item(item))
        menu.addAction("Rename…", lambda: self.ask_rename(ident, item.data(TITLE_ROLE), comparison))
        if not comparison:
            pinned = bool(item.data(PINNED_ROLE))
            menu.addAction("Unpin" if pinned else "Pin", lambda: self.pin_requested.emit(ident, not pinned))
            self.folder_menu(menu.addMenu("Move to folder"), ident)
        menu.addSeparator()
        delete = self.delete_comparison_requested if comparison else self.delete_requested
        menu.addAction("Delete", lambda: delete.emit(ident))
        menu.popup(self.viewport().mapToGlobal(pos))

    def folder_menu(self, menu: QMenu, ident: int) -> QMenu:
        """The folders to move a chat to, a new one, and out of its folder if it is in one."""
        row = self.row_for(ident)
        current = (row.data(FOLDER_ROLE) or "") if row is not None else ""
        for name in self.folders:
            action = menu.addAction(name)
            action.triggered.connect(lambda _checked=False, n=name: self.folder_requested.emit(ident, n))
            action.setCheckable(True)
            action.setChecked(name == current)
        menu.addAction("New folder…", lambda: self.ask_folder(ident))
        if current:
            menu.addSeparator()
            menu.addAction("Remove from folder", lambda: self.folder_requested.emit(ident, ""))
        return menu

    def ask_folder(self, ident: int) -> QInputDialog:
        return self._ask_text("New folder", "Folder name:", "",
                              lambda name: self.folder_requested.emit(ident, name))

    def ask_rename(self, ident: int, title: str, comparison: bool) -> QInputDialog:
        renamed = self.rename_comparison_requested if comparison else self.rename_requested
        return self._ask_text("Rename", "Title:", title or "", lambda new: renamed.emit(ident, new))

    def _ask_text(self, caption: str, label: str, text: str, chosen) -> QInputDialog:
        """open(), not the static getText: no nested event loop while the user types."""
        dialog = QInputDialog(self)
        dialog.setWindowTitle(caption)
        dialog.setLabelText(label)
        dialog.setTextValue(text)
        dialog.resize(RENAME_W, dialog.sizeHint().height())
        dialog.finished.connect(dialog.deleteLater)
        dialog.textValueSelected.connect(lambda new: chosen(new.strip()) if new.strip() else None)
        dialog.open()
        return dialog


class _SearchKeys(QObject):
    """The search box's filter for the keys that drive the list."""

    def __init__(self, rows: ConversationList, box: QLineEdit) -> None:
        super().__init__(box)
        self.rows, self.box = rows, box
        # A new query: the highlight is the chat in front's, yet Down and Enter start at the
        # first hit.
        self.fresh = True
        box.textChanged.connect(self._typed)
        box.installEventFilter(self)

    def _typed(self) -> None:
        self.fresh = True

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() != QEvent.Type.KeyPress or not isinstance(event, QKeyEvent):
            return False
        if event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            return False  # Ctrl+..., Shift+...: the box's own or the window's
        key = event.key()
        if key in (Qt.Key.Key_Down, Qt.Key.Key_Up):
            self.rows.step_current(1 if key == Qt.Key.Key_Down else -1, from_start=self.fresh)
            self.fresh = False
            return True
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if self.fresh and self.box.text().strip():
                self.rows.step_current(1, from_start=True)
            self.fresh = False
            return self.rows.open_current()
        return False


def _header(name: str) -> QListWidgetItem:
    row = QListWidgetItem(name)
    row.setData(HEADER_ROLE, True)
    row.setFlags(Qt.ItemFlag.NoItemFlags)  # not selectable, not clickable, skipped by the keys
    return row
