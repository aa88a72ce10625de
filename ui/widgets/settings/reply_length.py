"""The reply's length limit as a spin box: 0 shows "Until the model stops" (the engine's
UNLIMITED: the reply ends at end-of-generation, bounded by the context)."""

from __future__ import annotations

from PySide6.QtWidgets import QSpinBox, QWidget

from inference import UNLIMITED

MAX_REPLY_TOKENS = 32768
UNTIL_STOP_TEXT = "Until the model stops"


class ReplyLengthSpin(QSpinBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setRange(0, MAX_REPLY_TOKENS)
        self.setSpecialValueText(UNTIL_STOP_TEXT)  # shown at the minimum, 0
        self.setToolTip("The most tokens a reply may have; the lowest value lets the model finish")

    def tokens(self) -> int:
        return UNLIMITED if self.value() == 0 else self.value()

    def set_tokens(self, tokens: int) -> None:
        self.setValue(0 if tokens <= 0 else tokens)
