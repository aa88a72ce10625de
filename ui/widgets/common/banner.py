"""A line above a composer saying what the box holds for now, with a Cancel button: a message
queued for the reply's end (ComposerBox), a message being edited (ChatTab). Hidden until
shown; Cancel only says so (cancelled): what it undoes is the owner's."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget


class Banner(QWidget):
    cancelled = Signal()

    def __init__(self, text: str, cancel_tip: str, label_name: str, parent: QWidget | None = None) -> None:
        """label_name: the label's object name (style sheets and tests find it by it)."""
        super().__init__(parent)
        self.label = QLabel(text)
        self.label.setObjectName(label_name)
        self.cancel_button = QToolButton()
        self.cancel_button.setText("Cancel")
        self.cancel_button.setAutoRaise(True)
        self.cancel_button.setToolTip(cancel_tip)
        self.cancel_button.clicked.connect(self.cancelled)
        row = QHBoxLayout(self)
        row.setContentsMargins(4, 0, 0, 0)
        row.addWidget(self.label)
        row.addWidget(self.cancel_button)
        row.addStretch(1)
        self.hide()

    def set_text(self, text: str) -> None:
        self.label.setText(text)
