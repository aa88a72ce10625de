"""A chat's side panel: its model, its system prompt (and whether other chats share it in
the cache), its sampling settings edited in place, and the last reply's numbers with
Continue when the reply stopped at the token limit. A widget only: it shows what it is
given and emits what the user changes."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.chats.overflow import LABELS as OVERFLOW_LABELS
from app.engines.finish import rate_text
from ui.widgets.settings.chat_settings import CHAT_NAMES, SettingSpins
from ui.widgets.settings.reply_length import ReplyLengthSpin

PANEL_WIDTH = 280
# The chat's settings the panel edits: its sampling and what it keeps past the context.
SETTING_NAMES = (*CHAT_NAMES, "overflow")


@dataclass(frozen=True, slots=True)
class ReplyNumbers:
    """The last reply's numbers as the panel shows them; None: not known (a reply saved by
    an earlier run keeps its timings and counts, not its cache use or finish reason)."""

    ttft_s: float | None = None
    tok_s: float | None = None
    tokens: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    finish: str | None = None  # "done", "cut at the token limit", ...
    can_continue: bool = False  # it stopped at the token limit
    dropped: int | None = None  # earlier messages its prompt left out (a chat past the context)
    image_tokens: int | None = None  # the prompt's tokens that were images' rows (this run's replies)
    image_tokens_cached: int | None = None  # of them, found in the prefix cache (not encoded or prefilled)


def _seen_text(dropped: int | None) -> str:
    if dropped is None:
        return "—"
    if dropped == 0:
        return "the whole chat"
    return f"all but {dropped} earlier message{'s' if dropped != 1 else ''} (the context is full)"


def images_text(tokens: int | None, cached: int | None) -> str:
    """The last prompt's image tokens and whether they were reused ("" without images)."""
    if not tokens:
        return ""
    if cached is not None and cached >= tokens:
        return f"{tokens:,} tokens, reused from the cache"
    if cached:
        return f"{tokens:,} tokens, {cached:,} reused from the cache"
    return f"{tokens:,} tokens, computed for this reply"


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    font = label.font()
    font.setBold(True)
    label.setFont(font)
    return label


def _value(text: str = "—") -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    return label


class ChatSidePanel(QFrame):
    system_prompt_saved = Signal(str)
    sampling_changed = Signal(dict)  # every sampling field, as the chat stores them
    continue_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatSidePanel")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setFixedWidth(PANEL_WIDTH)
        self.model_label = _value()
        self.system_edit = QPlainTextEdit()
        self.system_edit.setPlaceholderText("No system prompt")
        self.system_edit.setFixedHeight(110)
        self.save_prompt_button = QPushButton("Save prompt")
        self.sharing_label = _value("")
        self.preset_label = _value("none")
        self.overflow_box = QComboBox()
        for key, text in OVERFLOW_LABELS.items():
            self.overflow_box.addItem(text, key)
        self.overflow_box.setToolTip("What the model still sees once this chat has outgrown its context")
        self.numbers: dict[str, QLabel] = {
            k: _value() for k in ("ttft", "rate", "tokens", "cached", "images", "seen", "finish")}
        self.documents_heading = _heading("Documents")
        self.documents_label = _value("")
        self.documents_label.setWordWrap(True)
        self.continue_button = QPushButton("Continue")
        self.continue_button.setToolTip("Write more of this reply: it stopped at the token limit")
        self._saved_prompt = ""
        self._loading = False
        self._busy = False
        self._can_continue = False
        self._build()
        self.system_edit.textChanged.connect(self._prompt_edited)
        self.save_prompt_button.clicked.connect(self._save_prompt)
        self.continue_button.clicked.connect(self.continue_requested)
        self._prompt_edited()
        self.set_numbers(None)

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addWidget(_heading("Model"))
        layout.addWidget(self.model_label)
        layout.addSpacing(6)
        layout.addWidget(_heading("System prompt"))
        layout.addWidget(self.system_edit)
        row = QHBoxLayout()
        row.addWidget(self.sharing_label, 1)
        row.addWidget(self.save_prompt_button)
        layout.addLayout(row)
        layout.addSpacing(6)
        layout.addWidget(self.documents_heading)
        layout.addWidget(self.documents_label)
        layout.addWidget(_heading("Sampling"))
        form = QFormLayout()
        form.addRow("Preset", self.preset_label)
        self.settings = SettingSpins(form)
        self.spins = self.settings.spins
        for spin in self.spins.values():
            spin.setKeyboardTracking(False)  # typing "0.35" saves once, not at "0." and "0.3"
            spin.valueChanged.connect(self._sampling_edited)
        self.overflow_box.currentIndexChanged.connect(self._sampling_edited)
        form.addRow("When full", self.overflow_box)  # of the context; the tooltip says it whole
        layout.addLayout(form)
        layout.addSpacing(6)
        layout.addWidget(_heading("Last reply"))
        numbers = QFormLayout()
        for key, label in (("ttft", "First token"), ("rate", "Speed"), ("tokens", "Reply tokens"),
                           ("cached", "Cached prompt"), ("images", "Images"), ("seen", "Model saw"),
                           ("finish", "Finish")):
            numbers.addRow(label, self.numbers[key])
        self.numbers_form = numbers
        layout.addLayout(numbers)
        layout.addWidget(self.continue_button)
        layout.addStretch(1)

    # ----- what the controller shows -----------------------------------------------------

    def set_model(self, label: str) -> None:
        self.model_label.setText(label)

    def set_system_prompt(self, text: str) -> None:
        self._saved_prompt = text
        self.system_edit.setPlainText(text)
        self._prompt_edited()

    def set_sharing(self, text: str) -> None:
        self.sharing_label.setText(text)

    def set_documents(self, text: str) -> None:
        """The chat's documents and what their tokens cost; hidden for a chat without any."""
        self.documents_label.setText(text)
        self.documents_heading.setVisible(bool(text))
        self.documents_label.setVisible(bool(text))

    def set_sampling(self, values: dict, preset_name: str | None) -> None:
        """values: every field in SETTING_NAMES (the chat's own on top of the defaults)."""
        self._loading = True
        try:
            self.overflow_box.setCurrentIndex(max(0, self.overflow_box.findData(values["overflow"])))
            self.settings.set_values(values)
        finally:
            self._loading = False
        self.preset_label.setText(preset_name or "none")

    def sampling(self) -> dict:
        return {**self.settings.values(), "overflow": self.overflow_box.currentData()}

    @property
    def reply_length(self) -> ReplyLengthSpin:
        return self.settings.reply_length

    def set_numbers(self, numbers: ReplyNumbers | None) -> None:
        n = numbers or ReplyNumbers()
        self.numbers["ttft"].setText("—" if n.ttft_s is None else f"{n.ttft_s:.2f} s")
        self.numbers["rate"].setText(rate_text(n.tok_s) if n.tok_s else "—")
        self.numbers["tokens"].setText("—" if n.tokens is None else str(n.tokens))
        if n.cached_tokens is not None and n.prompt_tokens:
            self.numbers["cached"].setText(f"{n.cached_tokens} of {n.prompt_tokens} tokens")
        else:
            self.numbers["cached"].setText("—")
        images = images_text(n.image_tokens, n.image_tokens_cached)
        self.numbers["images"].setText(images)
        self.numbers_form.setRowVisible(self.numbers["images"], bool(images))  # a chat without images: no row
        self.numbers["seen"].setText(_seen_text(n.dropped))
        self.numbers["finish"].setText(n.finish or "—")
        self._can_continue = n.can_continue
        self._update_continue()

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        self._update_continue()

    # ----- what the user does ------------------------------------------------------------

    def _update_continue(self) -> None:
        self.continue_button.setVisible(self._can_continue)
        self.continue_button.setEnabled(self._can_continue and not self._busy)

    def _prompt_edited(self) -> None:
        self.save_prompt_button.setEnabled(self.system_edit.toPlainText().strip() != self._saved_prompt)

    def _save_prompt(self) -> None:
        text = self.system_edit.toPlainText().strip()
        self._saved_prompt = text
        self._prompt_edited()
        self.system_prompt_saved.emit(text)

    def _sampling_edited(self) -> None:
        if not self._loading:
            self.sampling_changed.emit(self.sampling())
