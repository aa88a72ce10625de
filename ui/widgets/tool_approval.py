"""Above a chat's composer while a tool call waits for the user: what the model wants to
run, and Allow once / Always for this tool / Deny (the denial goes back to the model).
Nothing runs until one is chosen; the chat's reply waits meanwhile (Stop ends it)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

ARGUMENTS_SHOWN = 160  # characters of the arguments on the bar (the card shows them whole)


class ToolApprovalBar(QFrame):
    answered = Signal(str)  # "once", "always" or "deny"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolApproval")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.question = QLabel()
        self.question.setObjectName("toolApprovalQuestion")
        self.question.setWordWrap(True)
        self.question.setTextFormat(Qt.TextFormat.PlainText)
        self.allow_button = QPushButton("&Allow once")
        self.allow_button.setObjectName("toolAllowOnce")
        self.always_button = QPushButton("Al&ways for this tool")
        self.always_button.setObjectName("toolAllowAlways")
        self.always_button.setToolTip("Run this tool's calls in this chat without asking again")
        self.deny_button = QPushButton("&Deny")
        self.deny_button.setObjectName("toolDeny")
        self.deny_button.setToolTip("Do not run it; the model is told the user denied the call")
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 8, 4)
        row.addWidget(self.question, 1)
        for button, answer in ((self.allow_button, "once"), (self.always_button, "always"), (self.deny_button, "deny")):
            button.clicked.connect(lambda _checked=False, a=answer: self._answer(a))
            row.addWidget(button)
        self.hide()

    def ask(self, tool: str, server: str, arguments: str) -> None:
        shown = arguments if len(arguments) <= ARGUMENTS_SHOWN else arguments[:ARGUMENTS_SHOWN] + "…"
        self.question.setText(f"Run {tool} ({server}) with {shown}?")
        self.show()
        self.allow_button.setDefault(True)
        self.allow_button.setFocus()

    def waiting(self) -> bool:
        return self.isVisible()

    def dismiss(self) -> None:
        self.hide()

    def _answer(self, answer: str) -> None:
        self.hide()
        self.answered.emit(answer)
