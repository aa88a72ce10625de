"""The main window: the sidebar of conversations on the left; on the right the model picker's
bar over the chats' area (tab_area: one tab per open chat or comparison, the split view, the
welcome page while nothing is open); the status bar (status_bar), the menus and their keys
(menus), the live panel docked below. Widgets only: the controllers feed it and listen to
it. The moves on tabs are the area's, delegated here under the names the controllers call."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.compare.compare_view import ComparePane, CompareView
from ui.widgets.models.model_dialog import ModelDialog
from ui.widgets.models.model_picker import ModelPicker
from ui.widgets.models.remote_dialog import ask_remote_endpoint
from ui.widgets.perf.panel import PerfPanel
from ui.widgets.window.conversation_list import ConversationItem, ConversationList
from ui.widgets.window.menus import WindowMenus
from ui.widgets.window.status_bar import WindowStatusBar
from ui.widgets.window.tab_area import TabArea
from ui.widgets.window.tray import TrayNotifier
from ui.widgets.window.welcome import WelcomePage
from ui.widgets.window.window_style import style_window

PANEL_MIN_H = 140  # a row of charts under the engine's line


class MainWindow(QMainWindow):
    new_chat_requested = Signal()
    open_requested = Signal(int)
    open_match_requested = Signal(int, str)  # a sidebar search hit: the chat, the words searched
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
    settings_requested = Signal()  # open Settings (the chats' defaults)
    remote_requested = Signal(str, str, str)  # base URL, model, API key ("" for none)
    new_comparison_requested = Signal()
    leaderboard_requested = Signal()  # Chat → Blind leaderboard…
    prompt_library_requested = Signal()  # Chat → Prompt library…
    server_start_requested = Signal(str, int, str, tuple)  # host, port, API key ("" for none), image hosts
    server_stop_requested = Signal()
    open_comparison_requested = Signal(int)
    comparison_closed = Signal(int)
    rename_comparison_requested = Signal(int, str)
    delete_comparison_requested = Signal(int)
    undo_comparison_delete_requested = Signal(int)
    # The menus' own requests (View → Theme, Chat → Stop all, File → Export/Import)
    theme_requested = Signal(str)  # "system", "light" or "dark"
    stop_all_requested = Signal()
    export_requested = Signal(str, str, bool)  # path, format ("json" or "md"), every chat (else the current tab's)
    import_requested = Signal(str)  # path of a Chorus JSON export
    model_fetch_requested = Signal(str)  # a catalog model's key: download it, then load it
    example_requested = Signal(str)  # a new chat that sends this prompt (the welcome page's examples)
    models_requested = Signal()  # the Models window: the Hub and the model library
    split_changed = Signal()  # a chat went into the split view or out of it: both halves are on screen
    active_view_changed = Signal()  # the keys now go to the other half of the split
    ask_each_line_requested = Signal(object)  # the chat whose composer's lines become new tabs' questions

    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("Chorus")
        self.model_probe = None  # the app's ModelProbe, for the model dialog's estimates
        self.error_box: QMessageBox | None = None  # the latest show_error's box
        self.resize(1200, 800)
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText("Search chats (Ctrl+F)")
        self.search_box.setClearButtonEnabled(True)
        self.search_box.setAccessibleName("Search chats")  # a placeholder is no name to a screen reader
        self.conversation_list = ConversationList()
        self.conversation_list.setAccessibleName("Chats")
        self.new_button = QPushButton("New chat")
        self.compare_button = QPushButton("Compare")
        self.compare_button.setToolTip("Send one message to 2–4 models or settings side by side")
        self.preset_box = QComboBox()
        self.preset_box.setAccessibleName("Preset for new chats")
        self.preset_box.setToolTip("Preset for new chats: chats with the same preset share its prompt's KV cache")
        self.presets_button = QPushButton("Presets…")
        self.model_picker = ModelPicker()
        self.welcome = WelcomePage()
        self.area = TabArea(self.welcome)  # the tabs, the split view, the welcome page without tabs
        # Its parts by the names the controllers, the menus and the tests know them by
        self.tabs, self.split_pane, self.chat_split = self.area.tabs, self.area.split_pane, self.area.chat_split
        self.chat_stack = self.area.chat_stack
        self.status = WindowStatusBar(self)  # the engine, a load, a download, the server, Undo
        self.setStatusBar(self.status)
        self.status.undo_delete_requested.connect(self.undo_delete_requested)
        self.status.undo_comparison_delete_requested.connect(self.undo_comparison_delete_requested)
        self.perf_panel = PerfPanel(self)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.perf_panel)
        self.perf_panel.hide()
        self.perf_panel.visibilityChanged.connect(self._panel_shown)
        self._layout()
        self.notifier = TrayNotifier(self)  # a tray message when a reply finishes out of sight
        self.menus = WindowMenus(self)  # the menu bar and the window's actions with their keys
        for name in ("tab_closed", "comparison_closed", "split_changed", "active_view_changed"):
            getattr(self.area, name).connect(getattr(self, name))
        self.area.new_chat_needed.connect(self.new_chat_requested)
        self._wire_model_widgets()
        self.new_button.clicked.connect(self.new_chat_requested)
        self.compare_button.clicked.connect(self.new_comparison_requested)
        self.presets_button.clicked.connect(self.presets_requested)
        self.search_box.textChanged.connect(self.search_changed)
        self.conversation_list.drive_from(self.search_box)
        for name in ("open_requested", "open_match_requested", "rename_requested", "pin_requested",
                     "delete_requested", "open_comparison_requested", "rename_comparison_requested",
                     "delete_comparison_requested"):
            getattr(self.conversation_list, name).connect(getattr(self, name))
        style_window(self)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.FontChange):
            # Its palette(...) colours from the theme now in force; and a widget under a
            # style sheet keeps the font it was polished with until the sheet is set again
            # (a larger system font reached the window but not the chats).
            style_window(self)

    def _layout(self) -> None:
        side = self.sidebar = QWidget()
        box = QVBoxLayout(side)
        box.setContentsMargins(6, 6, 6, 6)
        box.addWidget(self.search_box)
        box.addWidget(self.conversation_list, 1)
        presets = QHBoxLayout()
        presets.addWidget(self.preset_box, 1)
        presets.addWidget(self.presets_button)
        box.addLayout(presets)
        new = QHBoxLayout()
        new.addWidget(self.new_button, 1)
        new.addWidget(self.compare_button)
        box.addLayout(new)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(side)
        split.addWidget(self._chat_area())
        split.setStretchFactor(1, 1)
        split.setSizes([260, 940])
        self.setCentralWidget(split)

    def _chat_area(self) -> QWidget:
        """The model picker's bar over the tabs, or over the welcome page when no tab is open."""
        self.sidebar_button = QToolButton()
        self.sidebar_button.setObjectName("sidebarButton")
        self.sidebar_button.setText("☰")
        self.sidebar_button.setAutoRaise(True)
        self.sidebar_button.setToolTip("Show or hide the sidebar (Ctrl+B)")
        self.sidebar_button.setAccessibleName("Sidebar")  # its text is the glyph ☰
        top = QHBoxLayout()
        top.setContentsMargins(2, 0, 0, 0)
        top.addWidget(self.sidebar_button)
        top.addWidget(self.model_picker, 1)
        area = QWidget()
        box = QVBoxLayout(area)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        box.addLayout(top)
        box.addWidget(self.area, 1)
        return area

    def _wire_model_widgets(self) -> None:
        self.tabs.currentChanged.connect(self._sidebar_follows_front)
        self.active_view_changed.connect(self._sidebar_follows_front)
        for source in (self.model_picker, self.welcome):
            source.model_chosen.connect(self.model_requested)
            source.fetch_requested.connect(self.model_fetch_requested)
            source.open_file_requested.connect(self.choose_model)
        self.model_picker.remote_requested.connect(self.ask_remote)
        self.model_picker.browse_requested.connect(self.models_requested)
        self.welcome.example_chosen.connect(self.example_requested)
        self.welcome.new_chat_requested.connect(self.new_chat_requested)
        self.welcome.compare_requested.connect(self.new_comparison_requested)

    # ----- conversations ---------------------------------------------------------------

    def set_conversations(self, items: list[ConversationItem], query: str = "", api_unlisted: int = 0) -> None:
        """The sidebar's rows; with the search's query, its hits (or a note that none match).
        api_unlisted: the older API conversations left out."""
        self.conversation_list.set_items(items, query, api_unlisted=api_unlisted)
        self._sidebar_follows_front()  # a chat just opened has its row only now

    def _sidebar_follows_front(self) -> None:
        """The sidebar marks the chat in front (the tab's, or the split's when the keys go
        there), whichever way it came to the front: a click, Ctrl+Tab, closing another."""
        front = self.current_tab()
        if isinstance(front, CompareView):
            self.conversation_list.select(front.comparison_id, comparison=True)
        elif front is not None:  # with no chat open, the row the user chose stays chosen
            self.conversation_list.select(front.conversation_id)

    def offer_undo_delete(self, conv_id: int, title: str, comparison: bool = False) -> None:
        """'Deleted' in the status bar with an Undo button, for a while."""
        self.status.offer_undo_delete(conv_id, title, comparison)

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

    # ----- the chats (TabArea): the moves the controllers, the menus and the tests call -----

    def open_tab(self, conversation_id: int, title: str) -> ChatTab:
        return self.area.open_tab(conversation_id, title)

    def open_compare(self, comparison_id: int, title: str) -> tuple[CompareView, bool]:
        return self.area.open_compare(comparison_id, title)

    def open_tabs(self) -> list[ChatTab]:
        return self.area.open_tabs()

    def open_comparisons(self) -> list[CompareView]:
        return self.area.open_comparisons()

    def tab_for(self, conversation_id: int) -> ChatTab | None:
        return self.area.tab_for(conversation_id)

    def compare_for(self, comparison_id: int) -> CompareView | None:
        return self.area.compare_for(comparison_id)

    def view_for(self, conversation_id: int) -> ChatTab | ComparePane | None:
        return self.area.view_for(conversation_id)

    def is_showing(self, view: ChatTab | ComparePane) -> bool:
        return self.area.is_showing(view)

    def current_tab(self) -> ChatTab | CompareView | None:
        return self.area.current_tab()

    def set_tab_title(self, tab: ChatTab | CompareView, title: str) -> None:
        self.area.set_tab_title(tab, title)

    def close_tab_of(self, conversation_id: int) -> None:
        self.area.close_tab_of(conversation_id)

    def close_current(self) -> None:
        self.area.close_current()

    def step_tab(self, step: int) -> None:
        self.area.step_tab(step)

    def focus_composer(self) -> None:
        self.area.focus_composer()

    def split_tab(self) -> ChatTab | None:
        return self.area.split_tab()

    def open_in_split(self, tab: ChatTab, ratio: float = 0.5) -> None:
        self.area.open_in_split(tab, ratio)

    def close_split(self) -> None:
        self.area.close_split()

    def split_right(self, on: bool) -> None:
        self.area.split_right(on)

    def focus_search(self) -> None:
        self.menus.sidebar_action.setChecked(True)  # a hidden sidebar comes back to be searched
        self.search_box.setFocus()

    def toggle_details(self) -> None:
        """The window's action, not a shortcut on each tab's button: the button's setText()
        ("Hide details") dropped its shortcut, so the key worked once."""
        tab = self.current_tab()
        if isinstance(tab, ChatTab):
            tab.panel_button.toggle()

    def stop_current(self) -> None:
        """Esc: an edit in the composer is cancelled first (the draft comes back), else the
        reply being written stops."""
        tab = self.current_tab()
        if isinstance(tab, ChatTab) and tab.editing is not None:
            tab.cancel_editing()
        elif tab is not None and tab.stop_button.isEnabled():
            tab.stop_requested.emit()

    # ----- status ---------------------------------------------------------------------

    def set_engine_status(self, text: str) -> None:
        self.status.set_engine_status(text)

    def set_load_progress(self, fraction: float | None) -> None:
        """Model loading progress; None hides the bar."""
        self.status.set_load_progress(fraction)

    def _panel_shown(self, visible: bool) -> None:
        """The panel takes a quarter of the window's height from the chat, not more window:
        at 900x600 the chat keeps room for several messages (issue 39, defect 9)."""
        if visible and self.perf_panel.isFloating() is False:
            self.resizeDocks([self.perf_panel], [max(PANEL_MIN_H, self.height() // 4)], Qt.Orientation.Vertical)

    def choose_model(self) -> ModelDialog:
        dialog = ModelDialog(self.model_probe, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)  # one per use, not one per use kept
        dialog.model_chosen.connect(self.model_load_requested)
        dialog.open()
        return dialog

    def ask_remote(self) -> None:
        ask_remote_endpoint(self, self.remote_requested.emit)

    def set_server_url(self, url: str | None) -> None:
        """The server's address in the status bar, or nothing when it is off."""
        self.menus.show_serving(url is not None)
        self.status.set_server_url(url)

    def show_error(self, title: str, message: str) -> QMessageBox:
        """A window-modal warning opened with open(): the static QMessageBox.warning ran a
        nested event loop, stalling every stream and storage hop until it was closed."""
        box = QMessageBox(QMessageBox.Icon.Warning, title, message, QMessageBox.StandardButton.Ok, self)
        box.finished.connect(box.deleteLater)
        self.error_box = box  # the latest, for tests and for callers that close it
        box.open()
        return box

    def show_model_error(self, message: str) -> QMessageBox:
        return self.show_error("Could not load the model", message)

