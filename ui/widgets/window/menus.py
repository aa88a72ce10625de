"""The main window's menu bar (File, Chat, View, Help) and the actions in it, with their keys.

The actions are the window's own (its children, added to it with window-wide shortcuts), so
Help → Keyboard shortcuts and the tests find them on the window by name, and a key works
wherever the focus is. What an action does is the window's: it emits one of the window's
requests or calls one of its moves (MenuHost says which), or, for a window a controller
owns (Chat → Jobs…), is kept here for that controller to connect to; the menus only keep their own
state (the theme checked, the recent models, File → Serve over HTTP checked or not) and open
the dialogs that belong to a menu item (export, import, serve, the shortcuts list)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import Qt, SignalInstance
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu, QMenuBar, QToolButton, QWidget

from ui.theme import THEMES
from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.common.file_dialogs import open_file_dialog
from ui.widgets.compare.compare_view import CompareView
from ui.widgets.perf.panel import PerfPanel
from ui.widgets.settings.server_dialog import ServerDialog
from ui.widgets.window.chat_tabs import ChatTabs
from ui.widgets.window.shortcuts_dialog import ShortcutsDialog, shortcut_rows
from ui.widgets.window.tray import TrayNotifier

EXPORT_FILTERS = "Chorus JSON (*.json);;Markdown (*.md)"  # the CLI's formats (chorus export --format)
IMPORT_FILTERS = "Chorus JSON (*.json);;All files (*)"  # what chorus import reads


class MenuHost(Protocol):
    """What the menus act on: the main window's requests, its moves, and its parts whose
    actions they show."""

    new_chat_requested: SignalInstance
    new_comparison_requested: SignalInstance
    models_requested: SignalInstance
    settings_requested: SignalInstance
    presets_requested: SignalInstance
    ask_each_line_requested: SignalInstance
    stop_all_requested: SignalInstance
    leaderboard_requested: SignalInstance
    prompt_library_requested: SignalInstance
    theme_requested: SignalInstance
    about_requested: SignalInstance
    export_requested: SignalInstance
    import_requested: SignalInstance
    server_start_requested: SignalInstance
    server_stop_requested: SignalInstance
    model_requested: SignalInstance
    split_changed: SignalInstance
    perf_panel: PerfPanel
    notifier: TrayNotifier
    sidebar: QWidget
    sidebar_button: QToolButton
    tabs: ChatTabs

    def window(self) -> QWidget: ...  # QWidget.window(): the main window itself, the actions' parent
    def menuBar(self) -> QMenuBar: ...  # noqa: N802 (Qt's name)
    def addAction(self, action: QAction, /) -> None: ...  # noqa: N802 (Qt's name)
    def close(self) -> bool: ...
    def current_tab(self) -> ChatTab | CompareView | None: ...
    def close_current(self) -> None: ...
    def step_tab(self, step: int) -> None: ...
    def focus_search(self) -> None: ...
    def focus_composer(self) -> None: ...
    def toggle_details(self) -> None: ...
    def stop_current(self) -> None: ...
    def choose_model(self) -> object: ...
    def ask_remote(self) -> None: ...
    def split_tab(self) -> ChatTab | None: ...
    def split_right(self, on: bool) -> None: ...
    def set_server_url(self, url: str | None) -> None: ...


def close_keys() -> list[QKeySequence]:
    """Ctrl+W and the platform's Close keys, each once: on X11 Close is Ctrl+W itself, and
    an action holding a key twice makes it ambiguous, so that pressing it did nothing."""
    keys: list[QKeySequence] = []
    for key in (QKeySequence("Ctrl+W"), *QKeySequence.keyBindings(QKeySequence.StandardKey.Close)):
        if key not in keys:
            keys.append(key)
    return keys


def _ignoring_result(slot: Callable[[], object]) -> Callable[..., None]:
    """A slot for QAction.triggered(checked) that calls a function taking no arguments."""

    def run(*_args: object) -> None:
        slot()

    return run


class WindowMenus:
    def __init__(self, host: MenuHost) -> None:
        self.host = host
        self.shortcuts_dialog: ShortcutsDialog | None = None
        window = host.window()
        shortcuts: list[tuple[str, QKeySequence | QKeySequence.StandardKey | list[QKeySequence],
                              Callable[[], object]]] = [
            ("New chat", QKeySequence.StandardKey.New, lambda: host.new_chat_requested.emit()),
            ("New comparison", QKeySequence("Ctrl+Shift+N"), lambda: host.new_comparison_requested.emit()),
            # Ctrl+W as in every tabbed app, and the platform's Close keys too
            ("Close tab", close_keys(), host.close_current),
            # Ctrl+PgDown / Ctrl+PgUp as in browsers and terminals, beside Ctrl+Tab
            ("Next tab", [QKeySequence("Ctrl+Tab"), QKeySequence("Ctrl+PgDown")], lambda: host.step_tab(1)),
            ("Previous tab", [QKeySequence("Ctrl+Shift+Tab"), QKeySequence("Ctrl+PgUp")],
             lambda: host.step_tab(-1)),
            ("Search", QKeySequence.StandardKey.Find, host.focus_search),
            ("Focus composer", QKeySequence("Ctrl+L"), host.focus_composer),
            ("Details", QKeySequence("Ctrl+Shift+D"), host.toggle_details),
            ("Stop, or cancel an edit", QKeySequence("Escape"), host.stop_current),
            ("Open model…", QKeySequence.StandardKey.Open, host.choose_model),
            ("Models…", QKeySequence("Ctrl+Shift+M"), lambda: host.models_requested.emit()),
            ("Settings…", QKeySequence("Ctrl+,"), lambda: host.settings_requested.emit()),
            ("Ask each line in a new tab", QKeySequence("Ctrl+Shift+Return"),
             lambda: host.ask_each_line_requested.emit(host.current_tab())),
        ]
        file_menu = host.menuBar().addMenu("&File")
        chat_menu = host.menuBar().addMenu("&Chat")
        in_file = {"New chat", "New comparison", "Open model…", "Models…", "Close tab", "Settings…"}
        for name, keys, slot in shortcuts:
            action = QAction(name, window)
            action.setShortcuts(keys) if isinstance(keys, list) else action.setShortcut(keys)
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            action.triggered.connect(_ignoring_result(slot))
            host.addAction(action)
            (file_menu if name in in_file else chat_menu).addAction(action)
        self.recent_menu = file_menu.addMenu("Recent models")
        self.recent_menu.setEnabled(False)
        view_menu = host.menuBar().addMenu("&View")
        panel = host.perf_panel.toggleViewAction()
        panel.setText("Performance panel")
        panel.setShortcut(QKeySequence("Ctrl+Shift+P"))
        view_menu.addAction(panel)
        self._view_actions(view_menu)
        # Background replies: a tray message when one finishes out of sight (off by default)
        view_menu.addAction(host.notifier.action)
        view_menu.setToolTipsVisible(True)  # a disabled option says why
        self.serve_action = QAction("Serve over HTTP (OpenAI API)…", window)
        self.serve_action.setCheckable(True)  # off by default, every start
        self.serve_action.toggled.connect(self._serve_toggled)
        file_menu.addAction(self.serve_action)
        remote = QAction("Connect to a server…", window)
        remote.triggered.connect(_ignoring_result(host.ask_remote))
        file_menu.addAction(remote)
        presets = QAction("Presets…", window)
        presets.triggered.connect(_ignoring_result(host.presets_requested.emit))
        file_menu.addAction(presets)
        self._menu_extras(file_menu, chat_menu, view_menu)
        file_menu.addSeparator()
        quit_action = QAction("Quit", window)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(_ignoring_result(host.close))
        file_menu.addAction(quit_action)
        about = QAction("About Chorus", window)
        about.triggered.connect(_ignoring_result(host.about_requested.emit))
        help_menu = host.menuBar().addMenu("&Help")
        shortcuts_action = QAction("Keyboard shortcuts", window)
        shortcuts_action.setShortcut(QKeySequence("Ctrl+/"))
        shortcuts_action.triggered.connect(_ignoring_result(self.show_shortcuts))
        host.addAction(shortcuts_action)
        help_menu.addAction(shortcuts_action)
        help_menu.addAction(about)

    def _view_actions(self, view_menu: QMenu) -> None:
        """View → Sidebar (Ctrl+B) and Split right (Ctrl+\\): both checkable, both with keys."""
        host, window = self.host, self.host.window()
        self.sidebar_action = QAction("Sidebar", window)
        self.sidebar_action.setCheckable(True)
        self.sidebar_action.setChecked(True)
        self.sidebar_action.setShortcut(QKeySequence("Ctrl+B"))
        self.sidebar_action.toggled.connect(host.sidebar.setVisible)
        host.sidebar_button.clicked.connect(self.sidebar_action.trigger)
        self.split_action = QAction("Split right", window)
        self.split_action.setCheckable(True)
        self.split_action.setShortcut(QKeySequence("Ctrl+\\"))
        self.split_action.triggered.connect(self._split_right)
        host.split_changed.connect(lambda: self.split_action.setChecked(host.split_tab() is not None))
        for action in (self.sidebar_action, self.split_action):
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            host.addAction(action)
            view_menu.addAction(action)

    def _split_right(self, on: bool) -> None:
        self.split_action.setChecked(False)  # until a chat is there: split_changed checks it
        self.host.split_right(on)

    # ----- theme, stop all, export and import ---------------------------------------------

    def _menu_extras(self, file_menu: QMenu, chat_menu: QMenu, view_menu: QMenu) -> None:
        host, window = self.host, self.host.window()
        self.export_chat_action = QAction("Export chat…", window)
        self.export_chat_action.triggered.connect(_ignoring_result(lambda: self.ask_export(every=False)))
        export_all = QAction("Export all chats…", window)
        export_all.triggered.connect(_ignoring_result(lambda: self.ask_export(every=True)))
        import_action = QAction("Import…", window)
        import_action.triggered.connect(_ignoring_result(self.ask_import))
        file_menu.addSeparator()
        for action in (self.export_chat_action, export_all, import_action):
            file_menu.addAction(action)
        self.export_chat_action.setEnabled(False)  # until a tab is open
        host.tabs.currentChanged.connect(lambda _i: self.export_chat_action.setEnabled(host.tabs.count() > 0))
        # Ctrl+Shift+S: free here, and Ctrl+Shift+Esc is the desktop's task manager on
        # Windows and KDE.
        stop_all = QAction("Stop all", window)
        stop_all.setShortcut(QKeySequence("Ctrl+Shift+S"))
        stop_all.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        stop_all.triggered.connect(_ignoring_result(host.stop_all_requested.emit))
        host.addAction(stop_all)
        chat_menu.addAction(stop_all)
        leaderboard = QAction("Blind leaderboard…", window)
        leaderboard.triggered.connect(_ignoring_result(host.leaderboard_requested.emit))
        chat_menu.addAction(leaderboard)
        library = QAction("Prompt library…", window)
        library.triggered.connect(_ignoring_result(host.prompt_library_requested.emit))
        chat_menu.addAction(library)
        # Chat → Jobs…: background jobs over a file's rows (ui/controllers/jobs.py listens)
        self.jobs_action = QAction("Jobs…", window)
        chat_menu.addAction(self.jobs_action)
        theme_menu = view_menu.addMenu("Theme")
        self.theme_group = QActionGroup(window)
        self.theme_group.setExclusive(True)
        for name in THEMES:
            action = QAction(name.capitalize(), self.theme_group)
            action.setCheckable(True)
            action.setData(name)
            # triggered, not toggled: set_theme() checks an action without asking again
            action.triggered.connect(_ignoring_result(partial(host.theme_requested.emit, name)))
            theme_menu.addAction(action)
        self.set_theme("system")

    def set_theme(self, name: str) -> None:
        """Shows the theme in force as checked in View → Theme (asks for nothing)."""
        for action in self.theme_group.actions():
            action.setChecked(action.data() == name)

    def ask_export(self, every: bool) -> QFileDialog:
        tab = self.host.current_tab()
        name = "chats" if every or tab is None else (tab.title or "chat")
        name = "".join(c if c.isalnum() or c in " -_" else "_" for c in name).strip() or "chat"
        return open_file_dialog(self.host.window(), "Export all chats" if every else "Export the chat",
                                EXPORT_FILTERS, lambda path, chosen: self._export_chosen(path, chosen, every),
                                directory=f"{name}.json", save=True)

    def _export_chosen(self, path: str, name_filter: str, every: bool) -> None:
        """The format is the filter's, or the name's when it says .md or .json."""
        suffix = Path(path).suffix.lower()
        fmt = "md" if suffix == ".md" else "json" if suffix == ".json" else "md" if "*.md" in name_filter else "json"
        if suffix not in (".md", ".json"):
            path += "." + fmt
        self.host.export_requested.emit(path, fmt, every)

    def ask_import(self) -> QFileDialog:
        return open_file_dialog(self.host.window(), "Import chats", IMPORT_FILTERS,
                                lambda path, _filter: self.host.import_requested.emit(path))

    # ----- recent models, the server, the shortcuts list -----------------------------------

    def set_recent_models(self, paths: list[str]) -> None:
        self.recent_menu.clear()
        for path in paths:
            self.recent_menu.addAction(path, partial(self.host.model_requested.emit, path))
        self.recent_menu.setEnabled(bool(paths))

    def _serve_toggled(self, on: bool) -> None:
        if not on:
            self.host.server_stop_requested.emit()
            return
        # open(), not exec(): a nested event loop would stall qasync's tasks meanwhile
        dialog = ServerDialog(self.host.window())
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.accepted.connect(lambda: self.host.server_start_requested.emit(*dialog.values()))
        dialog.rejected.connect(lambda: self.host.set_server_url(None))
        dialog.open()

    def show_serving(self, on: bool) -> None:
        """File → Serve over HTTP checked as the server is, without asking to start or stop it."""
        self.serve_action.blockSignals(True)
        self.serve_action.setChecked(on)
        self.serve_action.blockSignals(False)

    def shortcut_actions(self) -> list[QAction]:
        """Every action of the window that has a shortcut: the list Help shows."""
        return [a for a in self.host.window().findChildren(QAction) if a.shortcuts()]

    def show_shortcuts(self) -> ShortcutsDialog:
        """Non-modal: it can stay open beside the chat. Built from the actions each time,
        so it lists what the keys really do."""
        if self.shortcuts_dialog is not None:
            self.shortcuts_dialog.deleteLater()
        self.shortcuts_dialog = ShortcutsDialog(shortcut_rows(self.host.menuBar(), self.shortcut_actions()),
                                                self.host.window())
        self.shortcuts_dialog.show()
        return self.shortcuts_dialog
