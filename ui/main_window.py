"""The main window: conversations on the left, one tab per open conversation, the engine's
state in the status bar. Widgets only: the controller feeds it and listens to it."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMenu,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ui.chat_tab import ChatTab
from ui.model_dialog import ModelDialog
from ui.perf_panel import PerfPanel

WRITING_BADGE = "● "
PINNED_ROLE = Qt.ItemDataRole.UserRole + 1
TITLE_ROLE = Qt.ItemDataRole.UserRole + 2
UNDO_MS = 10_000
TAB_TITLE_CHARS = 28


def tab_title(title: str) -> str:
    title = title or "New chat"
    return title if len(title) <= TAB_TITLE_CHARS else title[: TAB_TITLE_CHARS - 1] + "…"


@dataclass(frozen=True, slots=True)
class ConversationItem:
    id: int
    title: str
    pinned: bool = False
    subtitle: str = ""


def _ignoring_result(slot):
    """A slot for QAction.triggered(checked) that calls a function taking no arguments."""

    def run(*_args) -> None:
        slot()

    return run


class MainWindow(QMainWindow):
    new_chat_requested = Signal()
    open_requested = Signal(int)
    tab_closed = Signal(int)
    search_changed = Signal(str)
    delete_requested = Signal(int)
    undo_delete_requested = Signal(int)
    rename_requested = Signal(int, str)
    pin_requested = Signal(int, bool)
    model_requested = Signal(str)  # path of a GGUF file to load
    model_load_requested = Signal(str, int)  # path and GPU layers (-1: the default), from the model dialog
    about_requested = Signal()
    presets_requested = Signal()  # open the preset editor
    remote_requested = Signal(str, str, str)  # base URL, model, API key ("" for none)

    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("Chorus")
        self.model_probe = None  # the app's ModelProbe, for the model dialog's estimates
        self.resize(1200, 800)
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText("Search chats (Ctrl+F)")
        self.search_box.setClearButtonEnabled(True)
        self.conversation_list = QListWidget()
        self.conversation_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.conversation_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.conversation_list.setSpacing(2)
        self.new_button = QPushButton("New chat")
        self.preset_box = QComboBox()
        self.preset_box.setToolTip("Preset for new chats: chats with the same preset share its prompt's KV cache")
        self.presets_button = QPushButton("Presets…")
        self.tabs = QTabWidget()
        self.tabs.setTabsClosable(True)
        self.tabs.setMovable(True)
        self.tabs.setDocumentMode(True)
        self.tabs.setElideMode(Qt.TextElideMode.ElideRight)
        self.tabs.setUsesScrollButtons(True)
        self.engine_label = QLabel("engine: starting…")
        self.load_progress = QProgressBar()
        self.load_progress.setRange(0, 100)
        self.load_progress.setMaximumWidth(160)
        self.load_progress.hide()
        self.statusBar().addPermanentWidget(self.load_progress)
        self.statusBar().addPermanentWidget(self.engine_label)
        self.perf_panel = PerfPanel(self)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.perf_panel)
        self.perf_panel.hide()
        self._layout()
        self._actions()
        self.new_button.clicked.connect(self.new_chat_requested)
        self.presets_button.clicked.connect(self.presets_requested)
        self.search_box.textChanged.connect(self.search_changed)
        self.conversation_list.itemActivated.connect(self._open_item)
        self.conversation_list.itemClicked.connect(self._open_item)
        self.conversation_list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.conversation_list.customContextMenuRequested.connect(self._conversation_menu)
        self.undo_button = QPushButton("Undo")
        self.undo_button.hide()
        self.statusBar().addWidget(self.undo_button)
        self.undo_button.clicked.connect(self._undo_clicked)
        self._undo_id: int | None = None
        self.tabs.tabCloseRequested.connect(self._close_tab)
        self.tabs.currentChanged.connect(self._clear_badge)

    def _layout(self) -> None:
        side = QWidget()
        box = QVBoxLayout(side)
        box.setContentsMargins(6, 6, 6, 6)
        box.addWidget(self.search_box)
        box.addWidget(self.conversation_list, 1)
        presets = QHBoxLayout()
        presets.addWidget(self.preset_box, 1)
        presets.addWidget(self.presets_button)
        box.addLayout(presets)
        box.addWidget(self.new_button)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(side)
        split.addWidget(self.tabs)
        split.setStretchFactor(1, 1)
        split.setSizes([260, 940])
        self.setCentralWidget(split)

    def _actions(self) -> None:
        shortcuts = [
            ("New chat", QKeySequence.StandardKey.New, lambda: self.new_chat_requested.emit()),
            ("Close tab", QKeySequence.StandardKey.Close, lambda: self._close_tab(self.tabs.currentIndex())),
            ("Next tab", QKeySequence("Ctrl+Tab"), lambda: self._step_tab(1)),
            ("Previous tab", QKeySequence("Ctrl+Shift+Tab"), lambda: self._step_tab(-1)),
            ("Search", QKeySequence.StandardKey.Find, lambda: self.search_box.setFocus()),
            ("Focus composer", QKeySequence("Ctrl+L"), self._focus_composer),
            ("Stop", QKeySequence("Escape"), self._stop_current),
            ("Open model…", QKeySequence.StandardKey.Open, self._choose_model),
        ]
        file_menu = self.menuBar().addMenu("&File")
        chat_menu = self.menuBar().addMenu("&Chat")
        in_file = {"New chat", "Open model…", "Close tab"}
        for name, keys, slot in shortcuts:
            action = QAction(name, self)
            action.setShortcut(keys)
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            action.triggered.connect(_ignoring_result(slot))
            self.addAction(action)
            (file_menu if name in in_file else chat_menu).addAction(action)
        self.recent_menu = file_menu.addMenu("Recent models")
        self.recent_menu.setEnabled(False)
        view_menu = self.menuBar().addMenu("&View")
        panel = self.perf_panel.toggleViewAction()
        panel.setText("Performance panel")
        panel.setShortcut(QKeySequence("Ctrl+Shift+P"))
        view_menu.addAction(panel)
        remote = QAction("Connect to a server…", self)
        remote.triggered.connect(_ignoring_result(self._ask_remote))
        file_menu.addAction(remote)
        presets = QAction("Presets…", self)
        presets.triggered.connect(_ignoring_result(self.presets_requested.emit))
        file_menu.addAction(presets)
        file_menu.addSeparator()
        quit_action = QAction("Quit", self)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(_ignoring_result(self.close))
        file_menu.addAction(quit_action)
        about = QAction("About Chorus", self)
        about.triggered.connect(_ignoring_result(self.about_requested.emit))
        self.menuBar().addMenu("&Help").addAction(about)

    # ----- conversations ---------------------------------------------------------------

    def set_conversations(self, items: list[ConversationItem]) -> None:
        self.conversation_list.clear()
        for item in items:
            text = ("📌 " if item.pinned else "") + (item.title or "New chat")
            widget_item = QListWidgetItem(text)
            widget_item.setData(Qt.ItemDataRole.UserRole, item.id)
            widget_item.setData(PINNED_ROLE, item.pinned)
            widget_item.setData(TITLE_ROLE, item.title)
            if item.subtitle:
                widget_item.setToolTip(item.subtitle)
            self.conversation_list.addItem(widget_item)

    def _conversation_menu(self, pos) -> None:
        item = self.conversation_list.itemAt(pos)
        if item is None:
            return
        conv_id = int(item.data(Qt.ItemDataRole.UserRole))
        pinned = bool(item.data(PINNED_ROLE))
        menu = QMenu(self)
        menu.addAction("Open", lambda: self.open_requested.emit(conv_id))
        menu.addAction("Rename…", lambda: self._ask_rename(conv_id, item.data(TITLE_ROLE)))
        menu.addAction("Unpin" if pinned else "Pin", lambda: self.pin_requested.emit(conv_id, not pinned))
        menu.addSeparator()
        menu.addAction("Delete", lambda: self.delete_requested.emit(conv_id))
        menu.popup(self.conversation_list.viewport().mapToGlobal(pos))

    def _ask_rename(self, conv_id: int, title: str) -> None:
        new, ok = QInputDialog.getText(self, "Rename chat", "Title:", text=title or "")
        if ok and new.strip():
            self.rename_requested.emit(conv_id, new.strip())

    def offer_undo_delete(self, conv_id: int, title: str) -> None:
        """'Deleted' in the status bar with an Undo button, for a while."""
        self._undo_id = conv_id
        self.statusBar().showMessage(f"Deleted “{title or 'New chat'}”", UNDO_MS)
        self.undo_button.show()
        QTimer.singleShot(UNDO_MS, self._hide_undo)

    def _undo_clicked(self) -> None:
        if self._undo_id is not None:
            self.undo_delete_requested.emit(self._undo_id)
        self._hide_undo()

    def _hide_undo(self) -> None:
        self._undo_id = None
        self.undo_button.hide()
        self.statusBar().clearMessage()

    def close_tab_of(self, conversation_id: int) -> None:
        tab = self.tab_for(conversation_id)
        if tab is not None:
            self._close_tab(self.tabs.indexOf(tab))

    def set_presets(self, presets: list[tuple[int, str]]) -> None:
        """(id, name) pairs; the first entry is always 'No preset'."""
        current = self.selected_preset()
        self.preset_box.clear()
        self.preset_box.addItem("No preset", None)
        for preset_id, name in presets:
            self.preset_box.addItem(name, preset_id)
            if preset_id == current:
                self.preset_box.setCurrentIndex(self.preset_box.count() - 1)

    def selected_preset(self) -> int | None:
        return self.preset_box.currentData()

    def _open_item(self, item: QListWidgetItem) -> None:
        self.open_requested.emit(int(item.data(Qt.ItemDataRole.UserRole)))

    # ----- tabs ---------------------------------------------------------------------

    def tab_for(self, conversation_id: int) -> ChatTab | None:
        for i in range(self.tabs.count()):
            tab = self.tabs.widget(i)
            if tab.conversation_id == conversation_id:
                return tab
        return None

    def open_tab(self, conversation_id: int, title: str) -> ChatTab:
        tab = self.tab_for(conversation_id)
        if tab is None:
            tab = ChatTab(conversation_id, title)
            index = self.tabs.addTab(tab, tab_title(title))
            self.tabs.setTabToolTip(index, title)
        self.tabs.setCurrentWidget(tab)
        return tab

    def open_tabs(self) -> list[ChatTab]:
        return [self.tabs.widget(i) for i in range(self.tabs.count())]

    def set_tab_title(self, tab: ChatTab, title: str) -> None:
        tab.title = title
        i = self.tabs.indexOf(tab)
        badge = WRITING_BADGE if self.tabs.tabText(i).startswith(WRITING_BADGE) else ""
        self.tabs.setTabText(i, badge + tab_title(title))
        self.tabs.setTabToolTip(i, title)

    def set_writing(self, tab: ChatTab, writing: bool) -> None:
        """A badge on background tabs that are writing."""
        i = self.tabs.indexOf(tab)
        show = writing and self.tabs.currentWidget() is not tab
        text = (WRITING_BADGE if show else "") + tab_title(tab.title)
        if self.tabs.tabText(i) != text:  # a new text lays the tab bar out again
            self.tabs.setTabText(i, text)

    def _clear_badge(self, index: int) -> None:
        tab = self.tabs.widget(index)
        if tab is not None:
            self.tabs.setTabText(index, tab_title(tab.title))

    def _close_tab(self, index: int) -> None:
        tab = self.tabs.widget(index)
        if tab is None:
            return
        self.tabs.removeTab(index)
        self.tab_closed.emit(tab.conversation_id)
        tab.deleteLater()

    def _step_tab(self, step: int) -> None:
        if self.tabs.count():
            self.tabs.setCurrentIndex((self.tabs.currentIndex() + step) % self.tabs.count())

    def current_tab(self) -> ChatTab | None:
        return self.tabs.currentWidget()

    def _focus_composer(self) -> None:
        tab = self.current_tab()
        if tab is not None:
            tab.composer.setFocus()

    def _stop_current(self) -> None:
        tab = self.current_tab()
        if tab is not None and tab.stop_button.isEnabled():
            tab.stop_requested.emit()

    # ----- status ---------------------------------------------------------------------

    def set_engine_status(self, text: str) -> None:
        self.engine_label.setText(text)

    def set_load_progress(self, fraction: float | None) -> None:
        """Model loading progress; None hides the bar."""
        if fraction is None or fraction >= 1.0:
            self.load_progress.hide()
        else:
            self.load_progress.show()
            self.load_progress.setValue(int(fraction * 100))

    def _choose_model(self) -> ModelDialog:
        dialog = ModelDialog(self.model_probe, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)  # one per use, not one per use kept
        dialog.model_chosen.connect(self.model_load_requested)
        dialog.open()
        return dialog

    def set_recent_models(self, paths: list[str]) -> None:
        self.recent_menu.clear()
        for path in paths:
            self.recent_menu.addAction(path, lambda p=path: self.model_requested.emit(p))
        self.recent_menu.setEnabled(bool(paths))

    def _ask_remote(self) -> None:
        url, ok = QInputDialog.getText(self, "Connect to a server", "Base URL (OpenAI-compatible):",
                                       text="http://127.0.0.1:8080/v1")
        if not ok or not url.strip():
            return
        model, ok = QInputDialog.getText(self, "Connect to a server", "Model:")
        if not ok or not model.strip():
            return
        key, ok = QInputDialog.getText(self, "Connect to a server", "API key (empty for none):",
                                       QLineEdit.EchoMode.Password)
        if ok:
            self.remote_requested.emit(url.strip(), model.strip(), key.strip())

    def show_model_error(self, message: str) -> None:
        QMessageBox.warning(self, "Could not load the model", message)
