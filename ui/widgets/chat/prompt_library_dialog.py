"""Chat → Prompt library…: the saved prompts, each a name and a text with {{variables}};
typed into any composer with "/" and the name's first letters. A window that stays open (no
nested event loop); every change is saved at once through `changed`."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.chats.prompt_library import SavedPrompt, problem

HINT = "Type / and a name's first letters in a chat's box to use a prompt; {{name}} marks a blank to fill."


class PromptLibraryDialog(QDialog):
    changed = Signal(list)  # the whole library, after an add, an edit or a removal

    def __init__(self, prompts: list[SavedPrompt], parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Prompt library")
        self.resize(640, 400)
        self.prompts = list(prompts)
        self.names = QListWidget()
        self.names.setAccessibleName("Saved prompts")
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("Name (typed after /)")
        self.name_edit.setAccessibleName("Prompt name")
        self.text_edit = QPlainTextEdit()
        self.text_edit.setPlaceholderText("Summarise {{text}} in three bullet points.")
        self.text_edit.setAccessibleName("Prompt text")
        self.text_edit.setTabChangesFocus(True)
        self.problem_label = QLabel()
        self.problem_label.setObjectName("composerNotice")  # the sheet's red for a line saying why not
        self.save_button = QPushButton("Save")
        self.new_button = QPushButton("New")
        self.remove_button = QPushButton("Remove")
        self._layout()
        self.names.currentRowChanged.connect(self._show)
        self.new_button.clicked.connect(self.start_new)
        self.save_button.clicked.connect(self.save)
        self.remove_button.clicked.connect(self.remove)
        self._fill(0)

    def _layout(self) -> None:
        left = QVBoxLayout()
        left.addWidget(self.names)
        row = QHBoxLayout()
        row.addWidget(self.new_button)
        row.addWidget(self.remove_button)
        left.addLayout(row)
        right = QVBoxLayout()
        right.addWidget(self.name_edit)
        right.addWidget(self.text_edit, 1)
        right.addWidget(self.problem_label)
        right.addWidget(self.save_button)
        hint = QLabel(HINT)
        hint.setWordWrap(True)
        hint.setEnabled(False)  # a note
        right.addWidget(hint)
        both = QHBoxLayout(self)
        both.addLayout(left, 1)
        both.addLayout(right, 2)
        # Tab from the name to the text to Save, then the list and its buttons.
        chain = [self.name_edit, self.text_edit, self.save_button, self.names, self.new_button, self.remove_button]
        for before, after in zip(chain, chain[1:]):
            QWidget.setTabOrder(before, after)

    def _fill(self, row: int) -> None:
        self.names.blockSignals(True)
        self.names.clear()
        self.names.addItems([p.name for p in self.prompts])
        self.names.blockSignals(False)
        if self.prompts:
            self.names.setCurrentRow(max(0, min(row, len(self.prompts) - 1)))
            self._show(self.names.currentRow())
        else:
            self.start_new()
        self.remove_button.setEnabled(bool(self.prompts))

    def _show(self, row: int) -> None:
        if 0 <= row < len(self.prompts):
            self.name_edit.setText(self.prompts[row].name)
            self.text_edit.setPlainText(self.prompts[row].text)
            self.problem_label.clear()

    def start_new(self) -> None:
        self.names.clearSelection()
        self.names.setCurrentRow(-1)
        self.name_edit.clear()
        self.text_edit.clear()
        self.problem_label.clear()
        self.name_edit.setFocus()

    def save(self) -> None:
        """The fields as the prompt shown (or a new one): refused with a line saying why."""
        row = self.names.currentRow()
        others = [p for i, p in enumerate(self.prompts) if i != row]
        name, text = self.name_edit.text().strip(), self.text_edit.toPlainText()
        why = problem(name, text, others)
        if why is not None:
            self.problem_label.setText(why)
            return
        prompt = SavedPrompt(name, text)
        if 0 <= row < len(self.prompts):
            self.prompts[row] = prompt
        else:
            self.prompts.append(prompt)
            row = len(self.prompts) - 1
        self._fill(row)
        self.changed.emit(list(self.prompts))

    def remove(self) -> None:
        row = self.names.currentRow()
        if 0 <= row < len(self.prompts):
            del self.prompts[row]
            self._fill(row)
            self.changed.emit(list(self.prompts))
