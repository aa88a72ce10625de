"""Above a chat's composer while a tool call waits for the user: what the model wants to
run, and Allow once / Always for this tool / Deny (the denial goes back to the model).
Nothing runs until one is chosen; the chat's reply waits meanwhile (Stop ends it)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QBoxLayout, QFrame, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

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
        self.always_button.setToolTip("Run this tool's calls without asking again, in every chat "
                                      "(Settings → Tools lists it; Ask again there revokes it)")
        self.deny_button = QPushButton("&Deny")
        self.deny_button.setObjectName("toolDeny")
        self.deny_button.setToolTip("Do not run it; the model is told the user denied the call")
        # The question over the buttons, the buttons side by side or, in a narrow half of the
        # split view, one above the other: the bar never widens the chat, so showing it never
        # moves the split's divider (issue 39, defect 12).
        box = QVBoxLayout(self)
        box.setContentsMargins(8, 4, 8, 4)
        box.addWidget(self.question)
        self.buttons = QBoxLayout(QBoxLayout.Direction.LeftToRight)
        self.buttons.addStretch(1)
        box.addLayout(self.buttons)
        answers = ((self.allow_button, "once"), (self.always_button, "always"), (self.deny_button, "deny"))
        for button, answer in answers:
            button.clicked.connect(lambda _checked=False, a=answer: self._answer(a))
            self.buttons.addWidget(button)
        widest = max(button.sizeHint().width() for button, _ in answers)
        self.setMinimumWidth(widest + 16)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.hide()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        needed = sum(button.sizeHint().width() + self.buttons.spacing()
                     for button in (self.allow_button, self.always_button, self.deny_button))
        side_by_side = needed + 16 <= event.size().width()
        direction = QBoxLayout.Direction.LeftToRight if side_by_side else QBoxLayout.Direction.TopToBottom
        if self.buttons.direction() != direction:
            self.buttons.setDirection(direction)

    def ask(self, tool: str, server: str, arguments: str) -> None:
        """server: "" when the tool is not offered now (a call asked again after a restart,
        before its server is ready)."""
        shown = arguments if len(arguments) <= ARGUMENTS_SHOWN else arguments[:ARGUMENTS_SHOWN] + "…"
        self.question.setText(f"Run {tool}{f' ({server})' if server else ''} with {shown}?")
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
