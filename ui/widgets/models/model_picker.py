"""The model loader at the top of the chats, as LM Studio's: a wide box at the centre naming
the model the chats run on and its state (loading, ready), whose button opens a menu to switch it
(installed files, the catalog, recent files, a remote server, a GGUF file), its state with
inline load or download progress, and the model of the tab in front when that one runs on
a model of its own. Widgets only: the controller feeds it and listens to it."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, QPoint, Qt, Signal
from PySide6.QtGui import QAction, QFont, QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QMenu, QProgressBar, QToolButton, QWidget

from app.models.names import ModelTitle, model_title

LOADING, READY, FAILED, DOWNLOADING = "loading", "ready", "failed", "downloading"
# Accents only (the rest follows the palette): the same in light and dark, readable on both.
STATE_COLOURS = {READY: "#2da44e", LOADING: "#d29922", DOWNLOADING: "#d29922", FAILED: "#e5534b"}
STATE_DOT = "●"
LOADER_MIN_W = 360  # wide enough to read a model's whole name at a glance
NAME_CHARS = 48
SEES_IMAGES = " · sees images"  # after the name of a model with a vision projector


@dataclass(frozen=True, slots=True)
class ModelStatus:
    """The main model and where it is: what the picker and the welcome page show."""

    name: str
    state: str = LOADING  # LOADING, READY, FAILED or DOWNLOADING
    detail: str = ""  # what is loading, or why it failed
    progress: float | None = None  # 0..1 while loading or downloading; None: unknown or done
    # What it runs with, beside its name once loaded: "8,192-token context", "GPU"
    settings: str = ""


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """One entry of the model menu: a GGUF file, or a catalog model to download first."""

    label: str
    path: str = ""  # the file; "" for a catalog model that is not installed
    key: str = ""  # the catalog key, for catalog models
    note: str = ""  # its licence, or where it comes from
    sees_images: bool = False  # it loads with a vision projector: its chats show it their images
    source: str = "PyPI"  # where a catalog model downloads from

    @property
    def installed(self) -> bool:
        return bool(self.path)


def state_text(status: ModelStatus) -> str:
    """"ready", "loading 40%", "failed: why" — one line for the bar and the welcome page."""
    text = status.detail or status.state
    if status.state == FAILED and status.detail:
        text = f"failed: {status.detail}"
    if status.progress is not None and status.state in (LOADING, DOWNLOADING):
        text += f" {status.progress * 100:.0f}%"
    return text


class ModelPicker(QWidget):
    model_chosen = Signal(str)  # a GGUF file to load
    fetch_requested = Signal(str)  # a catalog key: download it, then load it
    open_file_requested = Signal()  # the model dialog
    remote_requested = Signal()  # connect to an OpenAI-compatible server
    browse_requested = Signal()  # the Models window (search the Hub, the library)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelPicker")
        self.button = QToolButton()
        self.button.setObjectName("modelButton")
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.button.setAutoRaise(True)
        self.button.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0; }")  # the ▾ is in the text
        self._set_name_font()
        self.menu = QMenu(self)
        # clicked + popup(), not setMenu(): a tool button's own menu runs a nested event loop
        self.button.clicked.connect(self._show_menu)
        self.dot = QLabel(STATE_DOT)
        self.settings_label = QLabel()  # the quantisation and what the model runs with
        self.settings_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.state_label = QLabel()
        self.state_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setTextVisible(False)
        self.progress.setFixedSize(120, 8)
        self.progress.hide()
        self.tab_label = QLabel()  # the model of the tab in front, when it is not the main one
        self.tab_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.tab_label.hide()
        self.loader = QFrame()  # the box at the centre: name, state, progress
        self.loader.setObjectName("modelLoader")
        self.loader.setMinimumWidth(LOADER_MIN_W)
        inside = QHBoxLayout(self.loader)
        inside.setContentsMargins(8, 0, 10, 0)
        inside.setSpacing(6)
        inside.addStretch(1)  # name and state together at the box's centre
        inside.addWidget(self.dot)
        inside.addWidget(self.button)
        inside.addWidget(self.settings_label)
        inside.addSpacing(8)  # the state apart from the settings
        inside.addWidget(self.state_label)
        inside.addWidget(self.progress)
        inside.addStretch(1)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.setSpacing(6)
        layout.addStretch(1)
        layout.addWidget(self.loader)
        layout.addStretch(1)
        layout.addWidget(self.tab_label)
        self.status = ModelStatus("")
        self.current_path = ""
        self.installed: list[ModelChoice] = []
        self.catalog: list[ModelChoice] = []
        self.recent: list[ModelChoice] = []
        self.set_status(self.status)
        self._build_menu()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        # A widget with a style sheet keeps drawing its hover panel with the palette it was
        # polished under: after View → Theme → Dark the button's hover was a white box.
        if event.type() == QEvent.Type.PaletteChange:
            style = self.button.style()
            style.unpolish(self.button)
            style.polish(self.button)
            self.button.update()
        if event.type() == QEvent.Type.FontChange:  # the system's size changed: the name follows
            self._set_name_font()

    def _set_name_font(self) -> None:
        """The model's name a little larger than the picker's own text, and bold."""
        font = self.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.1)
        self.button.setFont(font)

    # ----- what the controller sets ------------------------------------------------------

    def _show_menu(self) -> None:
        self.menu.popup(self.button.mapToGlobal(QPoint(0, self.button.height())))

    def set_status(self, status: ModelStatus) -> None:
        self.status = status
        file = status.name or "No model"
        title = model_title(file) if status.name else ModelTitle(file)
        name = title.name
        self.button.setText(f"{name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + '…'}  ▾")
        self.button.setToolTip(f"{file}: choose another model, download one, or connect to a server")
        self.button.setAccessibleName(f"Model: {name}")  # whole, without the ▾ of its text
        settings = " · ".join(part for part in (title.quant, status.settings) if part)
        self.settings_label.setText(settings)
        self.settings_label.setVisible(bool(settings))
        self.dot.setStyleSheet(f"color: {STATE_COLOURS.get(status.state, STATE_COLOURS[LOADING])};")
        text = state_text(status)
        # A long error would push the bar wide: elided here, whole in the tooltip.
        self.state_label.setText(text if len(text) <= 60 else text[:59] + "…")
        self.state_label.setToolTip(text)
        busy = status.state in (LOADING, DOWNLOADING)
        self.progress.setVisible(busy)
        if busy and status.progress is None:
            self.progress.setRange(0, 0)  # busy: how far is not known
        elif busy:
            self.progress.setRange(0, 100)
            self.progress.setValue(int(status.progress * 100))

    def set_choices(self, installed: list[ModelChoice], catalog: list[ModelChoice], recent: list[ModelChoice],
                    current_path: str = "") -> None:
        """The menu's entries; catalog models that are installed are listed once, as installed."""
        self.installed, self.catalog, self.recent = installed, catalog, recent
        self.current_path = current_path
        self._build_menu()

    def set_tab_model(self, label: str | None) -> None:
        """The model of the tab in front when it runs on one of its own; None hides it."""
        self.tab_label.setVisible(bool(label))
        self.tab_label.setText(f"This chat: {label}" if label else "")

    # ----- the menu ------------------------------------------------------------------------

    def entries(self) -> list[QAction]:
        """The menu's actions that choose a model (not headers or separators), in order."""
        return [a for a in self.menu.actions() if a.data() is not None]

    def _build_menu(self) -> None:
        self.menu.clear()
        installed_paths = {c.path for c in self.installed}
        self._section("Installed", [self._load_action(c) for c in self.installed], "No model files yet")
        self._section("Catalog (downloads)", [self._fetch_action(c) for c in self.catalog
                                                        if not c.installed])
        recent = [c for c in self.recent if c.path not in installed_paths]
        self._section("Recent", [self._load_action(c) for c in recent])
        self.menu.addSeparator()
        self.menu.addAction("Browse models…", self.browse_requested.emit)
        self.menu.addAction("Open a GGUF file…", self.open_file_requested.emit)
        self.menu.addAction("Connect to a server…", self.remote_requested.emit)

    def _section(self, title: str, actions: list[QAction], empty: str = "") -> None:
        if not actions and not empty:
            return
        if self.menu.actions():
            self.menu.addSeparator()
        header = self.menu.addAction(title)
        header.setEnabled(False)
        font = QFont(header.font())
        font.setBold(True)
        header.setFont(font)
        if not actions:
            self.menu.addAction(empty).setEnabled(False)
        for action in actions:
            self.menu.addAction(action)

    def _load_action(self, choice: ModelChoice) -> QAction:
        action = QAction(choice.label + (SEES_IMAGES if choice.sees_images else ""), self.menu)
        action.setData(choice.path)
        action.setToolTip(choice.path + ("\nloads with its vision projector: it sees the images of a chat"
                                         if choice.sees_images else ""))
        action.setCheckable(True)
        action.setChecked(choice.path == self.current_path)
        action.triggered.connect(lambda _checked=False, p=choice.path: self.model_chosen.emit(p))
        return action

    def _fetch_action(self, choice: ModelChoice) -> QAction:
        note = f" — {choice.note}" if choice.note else ""
        vision = SEES_IMAGES if choice.sees_images else ""
        action = QAction(f"Download {choice.label}{vision}{note}", self.menu)
        action.setData(choice.key)
        action.triggered.connect(lambda _checked=False, k=choice.key: self.fetch_requested.emit(k))
        return action
