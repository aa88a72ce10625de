"""How much of the model's context a chat used at its last reply, in the chat tab's top line:
a small bar and "1,234 / 4,096 tokens", and what happens once the chat is longer than the
context (its overflow policy). A widget only: the side panel's controller feeds it."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QWidget

FULL_AT = 0.9  # from here the meter says what happens next
FULL_COLOUR = QColor("#d97706")  # amber: readable on both themes

# What the model sees once the chat is longer than the context, per overflow policy.
WHEN_FULL = {
    "drop_oldest": "the oldest turns leave the model's view",
    "truncate_middle": "the middle turns leave the model's view",
    "stop": "the next message will be refused",
}


def meter_text(used: int, n_ctx: int) -> str:
    return f"Context {used:,} / {n_ctx:,}"


def hint_text(used: int, n_ctx: int, dropped: int | None, policy: str) -> str:
    """The tooltip: the numbers, and what the model saw or will see."""
    share = f"{used:,} of {n_ctx:,} context tokens at the last reply ({used / n_ctx:.0%}: prompt and reply)"
    then = WHEN_FULL.get(policy, WHEN_FULL["drop_oldest"])
    if dropped:
        return f"{share}. The context is full: {then}; the model did not see {dropped} earlier " \
               f"message{'s' if dropped != 1 else ''} (the history keeps them)."
    if used >= FULL_AT * n_ctx:
        return f"{share}. Nearly full: past the context {then}."
    return share


class ElidedLabel(QLabel):
    """Gives way in a narrow tab (the window still fits 900x600): elided at its right, the
    whole text in the meter's tooltip."""

    def minimumSizeHint(self) -> QSize:
        return QSize(0, super().minimumSizeHint().height())

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        one_line = self.text().replace("\n", " · ")  # a line of its own, however many it was given
        text = self.fontMetrics().elidedText(one_line, Qt.TextElideMode.ElideRight, self.width())
        painter.drawText(self.rect(), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)


class ContextMeter(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bar = QProgressBar()
        self.bar.setTextVisible(False)
        self.bar.setFixedSize(64, 8)
        self.label = ElidedLabel()
        self.label.setObjectName("contextMeter")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.bar)
        layout.addWidget(self.label)
        self.hide()  # until a reply in this run or a saved one says how much it used

    def set_use(self, used: int | None, n_ctx: int | None, dropped: int | None = None,
                policy: str = "drop_oldest") -> None:
        """None for either: not known (no reply yet, or a remote model that did not say)."""
        if not used or not n_ctx:
            self.hide()
            return
        self.bar.setRange(0, n_ctx)
        self.bar.setValue(min(used, n_ctx))
        full = bool(dropped) or used >= FULL_AT * n_ctx
        then = WHEN_FULL.get(policy, WHEN_FULL["drop_oldest"])
        state = f" · full: {then}" if dropped else " · nearly full" if full else ""
        self.label.setText(meter_text(used, n_ctx) + state)
        palette = QPalette()  # nothing of its own: the theme's
        if full:
            palette.setColor(QPalette.ColorRole.WindowText, FULL_COLOUR)
        self.label.setPalette(palette)
        self.setToolTip(hint_text(used, n_ctx, dropped, policy))
        self.show()
