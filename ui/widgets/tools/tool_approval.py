"""Inside the chip of a tool call that waits for the user (ui/widgets/chat/tool_chips.py):
"Run add (test)?" and Allow once / Always for this tool / Deny (the denial goes back to the
model). Nothing runs until one is chosen; the chat's reply waits meanwhile (Stop ends it).

Real buttons (focus, Tab, mnemonics, accessible names come from Qt) on a transparent frame
that the message list lays over the room the chip leaves for them, under the call's
arguments; the chip says the rest (the tool's name, its state). Side by side where the
chip is wide enough, else the question above the buttons, or the buttons one above the
other in a narrow half of the split view: it never widens the chat."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QBoxLayout, QFrame, QLabel, QPushButton, QWidget

MARGIN = 0


class ToolApproval(QFrame):
    answered = Signal(str)  # "once", "always" or "deny"
    asked = Signal()  # shown for a call: the list lays it over that call's chip

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolApproval")
        self.call_id = ""  # the call asked about: the list lays the buttons over its chip
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
        self.box = QBoxLayout(QBoxLayout.Direction.LeftToRight, self)
        self.box.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        self.box.addWidget(self.question, 1)
        self.buttons = QBoxLayout(QBoxLayout.Direction.LeftToRight)
        self.box.addLayout(self.buttons)
        answers = ((self.allow_button, "once"), (self.always_button, "always"), (self.deny_button, "deny"))
        for button, answer in answers:
            button.setAccessibleName(button.text().replace("&", ""))
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(lambda _checked=False, a=answer: self._answer(a))
            self.buttons.addWidget(button)
        self.hide()

    def _widths(self) -> tuple[int, int]:
        """The question's width on one line, and the buttons' side by side."""
        spacing = self.buttons.spacing()
        buttons = sum(b.sizeHint().width() + spacing for b in (self.allow_button, self.always_button,
                                                                self.deny_button))
        return self.question.sizeHint().width(), buttons

    def arrangement(self, width: int) -> tuple[bool, bool, int]:
        """At width: the question beside the buttons, the buttons side by side, and the height."""
        question, buttons = self._widths()
        spacing = self.box.spacing()
        button_h = self.allow_button.sizeHint().height()
        one_row = question + spacing + buttons <= width - 2 * MARGIN
        side_by_side = buttons <= width - 2 * MARGIN
        if one_row:
            return True, True, max(button_h, self.question.sizeHint().height()) + 2 * MARGIN
        question_h = self.question.heightForWidth(width - 2 * MARGIN)
        rows = button_h if side_by_side else 3 * button_h + 2 * self.buttons.spacing()
        return False, side_by_side, question_h + spacing + rows + 2 * MARGIN

    def height_for(self, width: int) -> int:
        return self.arrangement(width)[2]

    def arrange(self, width: int) -> None:
        one_row, side_by_side, _height = self.arrangement(width)
        left, down = QBoxLayout.Direction.LeftToRight, QBoxLayout.Direction.TopToBottom
        if self.box.direction() != (left if one_row else down):
            self.box.setDirection(left if one_row else down)
        if self.buttons.direction() != (left if side_by_side else down):
            self.buttons.setDirection(left if side_by_side else down)

    def ask(self, call_id: str, tool: str, server: str) -> None:
        """server: "" when the tool is not offered now (a call asked again after a restart,
        before its server is ready)."""
        self.call_id = call_id
        self.question.setText(f"Run {tool}{f' ({server})' if server else ''}?")
        self.show()
        self.asked.emit()
        self.allow_button.setDefault(True)
        self.allow_button.setFocus()

    def waiting(self) -> bool:
        return self.isVisible()

    def dismiss(self) -> None:
        self.hide()
        self.call_id = ""

    def _answer(self, answer: str) -> None:
        self.hide()
        self.answered.emit(answer)
