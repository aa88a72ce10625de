"""The page shown where the tabs are when none is open (first start, or the last tab closed):
the model in use and its state, how to open or download another, a few example prompts
that start a chat, and the shortcuts to remember. Widgets only: it emits what the user asks
for, the controller decides. Colours come from the palette (light and dark alike), except
the state dot's accent."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QPalette
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from ui.widgets.models.model_picker import (
    DOWNLOADING,
    LOADING,
    SEES_IMAGES,
    STATE_COLOURS,
    STATE_DOT,
    ModelChoice,
    ModelStatus,
    state_text,
)

EXAMPLES = (
    "Explain how a hash map works, with a short Python example.",
    "Write a haiku about the sea.",
    "Give me three tips for learning to cook.",
    "Summarize the plot of Hamlet in three sentences.",
)
HINT = "Ctrl+N  new chat   ·   Ctrl+Shift+N  compare models side by side   ·   Ctrl+O  open a model"
COLUMN_W = 620
STYLE = """
QFrame#welcomeCard { background: palette(base); border: 1px solid palette(mid); border-radius: 8px; }
QPushButton#examplePrompt { text-align: left; padding: 9px 12px; background: palette(base);
    border: 1px solid palette(mid); border-radius: 6px; }
QPushButton#examplePrompt:hover { border-color: palette(highlight); }
QPushButton#examplePrompt:pressed { background: palette(alternate-base); }
"""


def _muted(label: QLabel) -> QLabel:
    label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
    return label


def _scaled(label: QLabel, factor: float, bold: bool = False) -> QLabel:
    font = QFont(label.font())
    font.setPointSizeF(font.pointSizeF() * factor)
    font.setBold(bold)
    label.setFont(font)
    return label


class WelcomePage(QScrollArea):
    example_chosen = Signal(str)  # start a chat with this prompt
    new_chat_requested = Signal()
    compare_requested = Signal()
    open_file_requested = Signal()  # the model dialog
    model_chosen = Signal(str)  # an installed catalog model's file, to load
    fetch_requested = Signal(str)  # a catalog key: download it, then load it
    cancel_fetch_requested = Signal()  # stop the download under way

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("welcomePage")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        page = QWidget()
        page.setObjectName("welcomeContent")
        page.setStyleSheet(STYLE)
        self.setWidget(page)
        column = QWidget()
        column.setMaximumWidth(COLUMN_W)
        outer = QHBoxLayout(page)
        outer.addStretch(1)
        outer.addWidget(column, 100)
        outer.addStretch(1)
        box = QVBoxLayout(column)
        box.setSpacing(10)
        box.addStretch(1)
        box.addWidget(_scaled(QLabel("Chorus"), 2.2, bold=True))
        box.addWidget(_muted(QLabel("Many conversations at once, on one model on this machine.")))
        box.addSpacing(8)
        box.addWidget(self._model_card())
        box.addSpacing(8)
        box.addWidget(_scaled(QLabel("Try a prompt"), 1.1, bold=True))
        self.example_buttons: list[QPushButton] = []
        for prompt in EXAMPLES:
            button = QPushButton(prompt)
            button.setObjectName("examplePrompt")
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(lambda _checked=False, p=prompt: self.example_chosen.emit(p))
            self.example_buttons.append(button)
            box.addWidget(button)
        starts = QHBoxLayout()
        self.new_chat_button = QPushButton("New chat")
        self.compare_button = QPushButton("Compare models")
        self.new_chat_button.clicked.connect(self.new_chat_requested)
        self.compare_button.clicked.connect(self.compare_requested)
        starts.addWidget(self.new_chat_button)
        starts.addWidget(self.compare_button)
        starts.addStretch(1)
        box.addSpacing(4)
        box.addLayout(starts)
        self.hint = _muted(QLabel(HINT))
        self.hint.setWordWrap(True)
        box.addWidget(self.hint)
        box.addStretch(2)
        self.catalog_rows: dict[str, tuple[QLabel, QPushButton, QProgressBar]] = {}
        self.set_status(ModelStatus(""))

    def _model_card(self) -> QFrame:
        card = QFrame()
        card.setObjectName("welcomeCard")
        box = QVBoxLayout(card)
        box.setContentsMargins(16, 14, 16, 14)
        head = QHBoxLayout()
        self.dot = QLabel(STATE_DOT)
        self.model_name = _scaled(QLabel(), 1.15, bold=True)
        self.model_name.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        head.addWidget(self.dot)
        head.addWidget(self.model_name, 1)
        box.addLayout(head)
        self.model_state = _muted(QLabel())
        self.model_state.setWordWrap(True)  # a failure's reason is read whole here
        box.addWidget(self.model_state)
        self.progress = QProgressBar()
        self.progress.setTextVisible(False)
        self.progress.setFixedHeight(8)
        self.progress.hide()
        box.addWidget(self.progress)
        buttons = QHBoxLayout()
        self.open_button = QPushButton("Open a GGUF file…")
        self.catalog_button = QPushButton("Catalog models ▸")
        self.catalog_button.setCheckable(True)
        self.open_button.clicked.connect(self.open_file_requested)
        self.catalog_button.toggled.connect(self._show_catalog)
        # The download of the main model (first start) is run from here: stopped, or tried again.
        self.cancel_button = QPushButton("Cancel download")
        self.retry_button = QPushButton("Retry download")
        self.cancel_button.hide()
        self.retry_button.hide()
        self._retry_key = ""
        self.cancel_button.clicked.connect(self.cancel_fetch_requested)
        self.retry_button.clicked.connect(lambda: self.fetch_requested.emit(self._retry_key))
        buttons.addWidget(self.retry_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.open_button)
        buttons.addWidget(self.catalog_button)
        buttons.addStretch(1)
        box.addLayout(buttons)
        self.catalog_panel = QWidget()
        self.catalog_list = QVBoxLayout(self.catalog_panel)
        self.catalog_list.setContentsMargins(0, 6, 0, 0)
        self.catalog_panel.hide()
        box.addWidget(self.catalog_panel)
        return card

    # ----- what the controller sets ------------------------------------------------------

    def set_status(self, status: ModelStatus) -> None:
        self.model_name.setText(status.name or "No model yet")
        self.dot.setStyleSheet(f"color: {STATE_COLOURS.get(status.state, STATE_COLOURS[LOADING])};")
        text = state_text(status)
        self.model_state.setText(text[:1].upper() + text[1:])
        busy = status.state in (LOADING, DOWNLOADING)
        self.progress.setVisible(busy)
        self.progress.setRange(0, 0 if status.progress is None else 100)  # (0, 0): busy, how far unknown
        if status.progress is not None:
            self.progress.setValue(int(status.progress * 100))

    def set_examples_enabled(self, enabled: bool) -> None:
        """The examples send at once: they wait for a model that is ready."""
        for button in self.example_buttons:
            button.setEnabled(enabled)
            button.setToolTip("" if enabled else "Waits for the model to be ready")

    def set_catalog(self, choices: list[ModelChoice], current_path: str = "") -> None:
        """The catalog's models, each with Load (installed), In use, or Download."""
        while self.catalog_list.count():  # one widget per row: its labels go with it
            row = self.catalog_list.takeAt(0).widget()
            row.setParent(None)
            row.deleteLater()
        self.catalog_rows.clear()
        for choice in choices:
            name = QLabel(f"<b>{choice.label}</b>{SEES_IMAGES if choice.sees_images else ''}")
            where = "installed" if choice.installed else f"not installed · downloads from {choice.source}"
            state = _muted(QLabel(f"{where} · {choice.note}" if choice.note else where))
            state.setWordWrap(True)  # a failed download says why
            button = QPushButton("Load" if choice.installed else "Download")
            if choice.installed and choice.path == current_path:
                button.setText("In use")
                button.setEnabled(False)
            if choice.installed:
                button.clicked.connect(lambda _c=False, p=choice.path: self.model_chosen.emit(p))
            else:
                button.clicked.connect(lambda _c=False, k=choice.key: self.fetch_requested.emit(k))
            progress = QProgressBar()
            progress.setTextVisible(False)
            progress.setFixedHeight(6)
            progress.hide()
            row = QWidget()
            line = QHBoxLayout(row)
            line.setContentsMargins(0, 0, 0, 0)
            texts = QVBoxLayout()
            texts.setSpacing(0)
            texts.addWidget(name)
            texts.addWidget(state)
            texts.addWidget(progress)
            line.addLayout(texts, 1)
            line.addWidget(button, 0, Qt.AlignmentFlag.AlignVCenter)
            self.catalog_list.addWidget(row)
            self.catalog_rows[choice.key] = (state, button, progress)

    def set_download(self, key: str, progress: float | None, message: str, active: bool) -> None:
        """A catalog model being downloaded (active), or how its download ended (message)."""
        if key not in self.catalog_rows:
            return
        state, button, bar = self.catalog_rows[key]
        button.setEnabled(not active)
        bar.setVisible(active)
        bar.setRange(0, 0 if progress is None else 100)  # (0, 0): busy, how far unknown
        if progress is not None:
            bar.setValue(int(progress * 100))
        if message:
            state.setText(message)

    def set_fetch_actions(self, running: bool, retry: str = "") -> None:
        """Cancel while a download runs; Retry (of the catalog key retry) after the main
        model's download failed or was cancelled."""
        self._retry_key = retry
        self.cancel_button.setVisible(running)
        self.retry_button.setVisible(bool(retry) and not running)

    def _show_catalog(self, shown: bool) -> None:
        self.catalog_panel.setVisible(shown)
        self.catalog_button.setText("Catalog models ▾" if shown else "Catalog models ▸")
