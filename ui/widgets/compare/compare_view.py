"""The compare view: 2 to 4 panes side by side, one conversation each, and one composer that
sends the same message to all of them. Widgets only: the controller feeds it and listens."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ui.widgets.chat.composer import ComposerBox
from ui.widgets.chat.file_drops import accept_file_drops
from ui.widgets.chat.message_list import MessageList
from ui.widgets.chat.message_model import MessageListModel
from ui.widgets.common.file_dialogs import open_file_dialog
from ui.widgets.common.focus import focus_kept_in
from ui.widgets.models.remote_dialog import ask_remote_endpoint

MIN_PANES, MAX_PANES = 2, 4
OTHER_FILE, OTHER_REMOTE = "__file__", "__remote__"
LETTERS = "ABCD"


class ComparePane(QFrame):
    """One side of a comparison. Shaped like a chat tab where the stream presenter looks
    (conversation_id, title, model, set_busy, set_state, set_result)."""

    source_chosen = Signal(int, str)  # conversation id, source key
    preset_chosen = Signal(int, object)  # conversation id, preset id or None
    settings_requested = Signal(int)
    continue_requested = Signal(int)
    favourite_picked = Signal(int)
    remove_requested = Signal(int)
    branch_requested = Signal(int, int)  # message id, step: the ‹ › arrows on a message
    busy_changed = Signal()

    def __init__(self, conversation_id: int, title: str, parent=None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.conversation_id = conversation_id
        self.title = title
        self.busy = False
        self.compare: CompareView | None = None  # set when added to one
        self.source_label = ""
        self.model = MessageListModel(self)
        self.name_label = QLabel()
        self.name_label.setObjectName("paneName")
        self.source_box = QComboBox()
        self.source_box.setToolTip("The model this pane uses")
        self.preset_box = QComboBox()
        self.preset_box.setToolTip("The preset (system prompt and sampling) this pane starts with")
        self.settings_button = QToolButton()
        self.settings_button.setText("⚙")
        self.settings_button.setToolTip("This pane's sampling settings")
        self.remove_button = QToolButton()
        self.remove_button.setText("✕")
        self.remove_button.setToolTip("Remove this pane")
        self.view = MessageList(self.model)
        self.view.delegate.branch_clicked.connect(self.branch_requested)
        self.state_label = QLabel("ready")
        self.state_label.setObjectName("tabState")
        self.stats_label = QLabel("")
        self.stats_label.setObjectName("paneStats")
        self.stats_label.setWordWrap(True)
        self.continue_button = QPushButton("Continue with this one")
        self.continue_button.setToolTip("Go on with this pane's conversation as a normal chat tab")
        self.pick_button = QPushButton("Pick this one")
        self.pick_button.setToolTip("Blind mode: choose your favourite, then see which model wrote what")
        self.pick_button.hide()
        self._layout()
        self.source_box.activated.connect(self._source_activated)
        self.preset_box.activated.connect(
            lambda _i: self.preset_chosen.emit(self.conversation_id, self.preset_box.currentData()))
        self.settings_button.clicked.connect(lambda: self.settings_requested.emit(self.conversation_id))
        self.continue_button.clicked.connect(lambda: self.continue_requested.emit(self.conversation_id))
        self.pick_button.clicked.connect(lambda: self.favourite_picked.emit(self.conversation_id))
        self.remove_button.clicked.connect(lambda: self.remove_requested.emit(self.conversation_id))
        self._current_source = ""

    def _layout(self) -> None:
        head = QHBoxLayout()
        head.addWidget(self.name_label)
        head.addWidget(self.source_box, 1)
        head.addWidget(self.settings_button)
        head.addWidget(self.remove_button)
        foot = QHBoxLayout()
        foot.addWidget(self.continue_button)
        foot.addWidget(self.pick_button)
        foot.addStretch(1)
        box = QVBoxLayout(self)
        box.setContentsMargins(4, 4, 4, 4)
        box.addLayout(head)
        box.addWidget(self.preset_box)
        box.addWidget(self.state_label)
        box.addWidget(self.view, 1)
        box.addWidget(self.stats_label)
        box.addLayout(foot)

    # ----- what the controller sets --------------------------------------------------

    def set_source_choices(self, choices: list[tuple[str, str]], current: str) -> None:
        self.source_box.clear()
        for key, label in choices:
            self.source_box.addItem(label, key)
        self.source_box.insertSeparator(self.source_box.count())
        self.source_box.addItem("Other GGUF file…", OTHER_FILE)
        self.source_box.addItem("Remote server…", OTHER_REMOTE)
        self.set_source(current, dict(choices).get(current, current))

    def set_source(self, key: str, label: str) -> None:
        index = self.source_box.findData(key)
        if index < 0:
            self.source_box.insertItem(0, label, key)
            index = 0
        self.source_box.setCurrentIndex(index)
        self._current_source = key
        self.source_label = label

    @property
    def contender(self) -> str:
        """What a blind pick votes for: the model, and the preset when the pane has one."""
        preset = self.preset_box.currentText() if self.preset_box.currentData() is not None else ""
        return f"{self.source_label} · {preset}" if preset else self.source_label

    def set_presets(self, presets: list[tuple[int, str]], current: int | None) -> None:
        self.preset_box.clear()
        self.preset_box.addItem("No preset", None)
        for preset_id, name in presets:
            self.preset_box.addItem(name, preset_id)
        index = self.preset_box.findData(current) if current is not None else 0
        self.preset_box.setCurrentIndex(max(0, index))

    def lock_preset(self, locked: bool) -> None:
        """The preset opens the conversation: it cannot change once the pane has talked."""
        self.preset_box.setEnabled(not locked)

    def set_name(self, text: str) -> None:
        self.name_label.setText(text)

    def set_state(self, text: str) -> None:
        self.state_label.setText(text)

    def set_blinded(self, blinded: bool) -> None:
        """Blind mode hides what could tell the models apart besides their words: speed,
        timings and cached tokens."""
        for widget in (self.source_box, self.preset_box, self.settings_button, self.state_label, self.stats_label):
            widget.setVisible(not blinded)
        self.pick_button.setVisible(blinded)
        self.view.delegate.show_meta = not blinded
        self.view.viewport().update()

    def set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.continue_button.setEnabled(not busy and self.model.rowCount() > 0)
        self.busy_changed.emit()

    def set_result(self, text: str) -> None:
        """The finished reply's numbers: time to first token, tokens/s, tokens, why it ended."""
        self.stats_label.setText(text)

    def _source_activated(self, _index: int) -> None:
        key = self.source_box.currentData()
        if key in (OTHER_FILE, OTHER_REMOTE):
            # Put the current model back until the dialog gives a new one.
            self.source_box.setCurrentIndex(max(0, self.source_box.findData(self._current_source)))
        self.source_chosen.emit(self.conversation_id, key)


PLACEHOLDER = "Message to every pane (Enter sends, Shift+Enter for a new line)"


class CompareView(QWidget):
    send_requested = Signal(str, object)  # the text, and the documents attached (a tuple of NewDocument)
    stop_requested = Signal()
    regenerate_requested = Signal()
    add_pane_requested = Signal()
    blind_toggled = Signal(bool)
    diff_requested = Signal()
    export_requested = Signal(str)  # a Markdown file to write the comparison into
    # Re-emitted from the panes, with the pane's conversation id:
    source_chosen = Signal(int, str)
    source_file_chosen = Signal(int, str)  # a GGUF path
    source_remote_chosen = Signal(int, str, str, str)  # base URL, model, key
    preset_chosen = Signal(int, object)
    settings_requested = Signal(int)
    continue_requested = Signal(int)
    favourite_picked = Signal(int)
    remove_pane_requested = Signal(int)
    branch_requested = Signal(int, int, int)  # conversation id, message id, step
    all_done = Signal()  # the last pane still writing has finished

    conversation_id = None  # not one conversation: the main window tells tabs apart by this

    def __init__(self, comparison_id: int, title: str, parent=None) -> None:
        super().__init__(parent)
        self.comparison_id = comparison_id
        self.title = title
        self.blind = False
        self.favourite: int | None = None
        self._panes: list[ComparePane] = []
        self._was_busy = False
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setChildrenCollapsible(False)
        self.add_button = QPushButton("Add pane")
        self.blind_box = QCheckBox("Blind")
        self.blind_box.setToolTip("Hide which model wrote which answer until you pick a favourite")
        self.diff_button = QPushButton("Differences…")
        self.diff_button.setToolTip("Word-level differences between two panes' last answers")
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("The comparison as Markdown: each question, then every pane's answer")
        self.agreement_label = QLabel("")
        self.agreement_label.setObjectName("agreement")
        self.composer_box = ComposerBox(PLACEHOLDER, send_tooltip="Send to all (Enter)")
        self.composer = self.composer_box.composer
        self.composer.setFixedHeight(40)
        self.send_button = self.composer_box.send_button
        self.stop_button = self.composer_box.stop_button
        self.stop_button.setToolTip("Stop every pane")
        self.drops = accept_file_drops(self, self.composer_box.attach)  # a drop anywhere on the view
        self.regenerate_button = QPushButton("Regenerate all")
        self.regenerate_button.setToolTip("A new answer in every pane (the old ones stay, ‹ › on the message)")
        self._layout()
        self.add_button.clicked.connect(self.add_pane_requested)
        self.blind_box.toggled.connect(self.blind_toggled)
        self.diff_button.clicked.connect(self.diff_requested)
        self.export_button.clicked.connect(self._export_clicked)
        self.composer.submitted.connect(self._submit)
        self.send_button.clicked.connect(self.composer.submit)  # as Enter does
        self.stop_button.clicked.connect(self.stop_requested)
        self.regenerate_button.clicked.connect(self.regenerate_requested)
        self._update_buttons()

    def _layout(self) -> None:
        bar = QHBoxLayout()
        bar.addWidget(self.add_button)
        bar.addWidget(self.blind_box)
        bar.addWidget(self.diff_button)
        bar.addWidget(self.export_button)
        bar.addWidget(self.agreement_label, 1)
        bar.addWidget(self.regenerate_button)
        box = QVBoxLayout(self)
        box.setContentsMargins(6, 6, 6, 6)
        box.addLayout(bar)
        box.addWidget(self.splitter, 1)
        box.addWidget(self.composer_box)

    # ----- panes -------------------------------------------------------------------

    def add_pane(self, conversation_id: int, title: str) -> ComparePane:
        pane = ComparePane(conversation_id, title)
        pane.compare = self
        forwards = (
            (pane.source_chosen, self._pane_source), (pane.preset_chosen, self.preset_chosen),
            (pane.settings_requested, self.settings_requested), (pane.continue_requested, self.continue_requested),
            (pane.favourite_picked, self.favourite_picked), (pane.remove_requested, self.remove_pane_requested),
            (pane.busy_changed, self._update_buttons),
            (pane.branch_requested,
             lambda message_id, step, p=pane: self.branch_requested.emit(p.conversation_id, message_id, step)),
        )
        for signal, slot in forwards:
            signal.connect(slot)
        self._panes.append(pane)
        self.splitter.addWidget(pane)
        self._refresh_names()
        self._update_buttons()
        return pane

    def remove_pane(self, conversation_id: int) -> None:
        pane = self.pane_for(conversation_id)
        if pane is None:
            return
        self._panes.remove(pane)
        pane.setParent(None)
        pane.deleteLater()
        self._refresh_names()
        self._update_buttons()

    def panes(self) -> list[ComparePane]:
        """In the order they are shown, left to right."""
        return sorted(self._panes, key=self.splitter.indexOf)

    def pane_for(self, conversation_id: int) -> ComparePane | None:
        return next((p for p in self._panes if p.conversation_id == conversation_id), None)

    def set_order(self, conversation_ids: list[int]) -> None:
        """Show the panes in this order (blind mode shuffles them)."""
        for i, conv_id in enumerate(conversation_ids):
            pane = self.pane_for(conv_id)
            if pane is not None:
                self.splitter.insertWidget(i, pane)
        self._refresh_names()

    # ----- blind mode ----------------------------------------------------------------

    def set_blind(self, blind: bool, favourite: int | None = None) -> None:
        """Blind: letters instead of model names, and a Pick button on each pane; picking a
        favourite reveals the names again."""
        self.blind, self.favourite = blind, favourite
        self.blind_box.blockSignals(True)
        self.blind_box.setChecked(blind)
        self.blind_box.blockSignals(False)
        self._refresh_names()

    def hidden(self) -> bool:
        return self.blind and self.favourite is None

    def _refresh_names(self) -> None:
        hidden = self.hidden()
        for i, pane in enumerate(self.panes()):
            letter = LETTERS[i] if i < len(LETTERS) else "?"
            star = "★ " if pane.conversation_id == self.favourite else ""
            pane.set_name(star + (f"Model {letter}" if hidden else letter))
            pane.set_blinded(hidden)

    # ----- composer ----------------------------------------------------------------

    def _export_clicked(self) -> None:
        open_file_dialog(self, "Export the comparison", "Markdown (*.md);;All files (*)",
                         lambda path, _filter: self.export_requested.emit(path),
                         directory=f"{self.title or 'comparison'}.md", save=True, default_suffix="md")


    def _submit(self, text: str) -> None:
        self.send_requested.emit(text, self.composer_box.take_documents())

    def busy(self) -> bool:
        return any(p.busy for p in self._panes)

    def set_busy(self, busy: bool) -> None:
        self._update_buttons()

    def set_agreement(self, text: str) -> None:
        self.agreement_label.setText(text)

    def _update_buttons(self) -> None:
        busy = self.busy()
        if self._was_busy and not busy:
            self.all_done.emit()
        self._was_busy = busy
        with focus_kept_in(self, self.composer):  # a clicked button that is disabled now
            self.composer_box.set_busy(busy)
            self.regenerate_button.setEnabled(not busy and any(p.model.rowCount() for p in self._panes))
            self.add_button.setEnabled(len(self._panes) < MAX_PANES and not busy)
            for pane in self._panes:
                pane.remove_button.setEnabled(len(self._panes) > MIN_PANES and not busy)
        self.composer.setPlaceholderText("Writing… (Stop ends every pane)" if busy else PLACEHOLDER)

    def _pane_source(self, conversation_id: int, key: str) -> None:
        if key == OTHER_FILE:
            open_file_dialog(self, "Open a GGUF model", "GGUF models (*.gguf);;All files (*)",
                             lambda path, _filter: self.source_file_chosen.emit(conversation_id, path))
        elif key == OTHER_REMOTE:
            ask_remote_endpoint(self, lambda *answer: self.source_remote_chosen.emit(conversation_id, *answer))
        else:
            self.source_chosen.emit(conversation_id, key)
