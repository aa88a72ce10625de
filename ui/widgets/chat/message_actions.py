"""The action bar on the message under the mouse: Copy, Edit, Delete, Regenerate, Branch
into a new chat, and Continue on a reply cut at the token limit, as a row of small icons
whose tooltips say what each does (words where Qt cannot read SVG).

Real buttons in a small frame laid over the list's viewport rather than buttons painted by
the delegate and hit-tested in editorEvent: hover, press and disabled states, tooltips,
accessible names and clicks come from Qt, and the delegate (which lays out and paints the
reply's text) needs no change. The bar sits on the bubble's bottom edge at its right, where
bubbles have only padding, so it covers no text and not the header's branch arrows.

It is moved only when the row under the mouse changes. A scroll, a relayout or a change to
the hovered row (or one above it) hides it until the mouse moves again, so it is never moved
per frame while a reply streams (a child of the view moved per frame asks the view for a
layout each time, and that made streaming ten times slower: see message_list.py)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPoint, QSize, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QListView, QToolButton

from ui.icon import action_icon
from ui.widgets.chat.message_delegate import PAD, bubble_rect
from ui.widgets.chat.message_model import MessageView

# name: (label, tooltip), in the bar's order
ACTIONS: dict[str, tuple[str, str]] = {
    "copy": ("Copy", "Copy the message's text"),
    "edit": ("Edit", "Edit the message in the composer; the edit is a new branch"),
    "delete": ("Delete", "Delete this message (and the messages after it)"),
    "regenerate": ("Regenerate", "Write another reply here (a new branch; this one stays)"),
    "branch": ("Branch", "A new chat holding the conversation up to here, in a new tab"),
    "continue": ("Continue", "Write more of this reply: it stopped at the token limit"),
}
COPIED = "Copied ✓"


class MessageActions(QFrame):
    """available(view) names the actions a message offers (in ACTIONS); a click emits
    triggered(name, view). A widget only: the tab decides what an action does."""

    triggered = Signal(str, object)  # action name, the MessageView it was on

    def __init__(self, view: QListView, available: Callable[[MessageView], list[str]]) -> None:
        super().__init__(view.viewport())
        self.list_view = view
        self.available = available
        self.row: int | None = None  # the row the bar is on
        self.setObjectName("messageActions")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)
        self.setBackgroundRole(QPalette.ColorRole.Window)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 1, 2, 1)
        layout.setSpacing(0)
        self.buttons: dict[str, QToolButton] = {}
        for name, (label, tip) in ACTIONS.items():
            layout.addWidget(self._button(name, label, tip))
        self.hide()
        view.viewport().setMouseTracking(True)
        view.viewport().installEventFilter(self)
        self._watch(view)

    def _button(self, name: str, label: str, tip: str) -> QToolButton:
        button = QToolButton(self)
        button.setText(label)
        icon = action_icon(name)
        if icon is not None:  # a row of small icons; the word is its accessible name and tooltip
            button.setIcon(icon)
            button.setIconSize(QSize(16, 16))
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
            tip = f"{label}: {tip[0].lower()}{tip[1:]}"
        button.setToolTip(tip)
        button.setAccessibleName(label)
        button.setAutoRaise(True)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # focus stays in the composer
        button.clicked.connect(lambda _checked=False, n=name: self._clicked(n))
        self.buttons[name] = button
        return button

    def _watch(self, view: QListView) -> None:
        """Whatever moves the rows hides the bar (the next mouse move shows it again)."""
        view.verticalScrollBar().valueChanged.connect(self.dismiss)
        view.itemDelegate().sizeHintChanged.connect(self.dismiss)
        model = view.model()
        for signal in (model.modelReset, model.layoutChanged, model.rowsInserted, model.rowsRemoved):
            signal.connect(self.dismiss)
        model.dataChanged.connect(self._rows_changed)

    # ----- following the mouse ---------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind == QEvent.Type.MouseMove:
            self.hover(event.position().toPoint())
        elif kind == QEvent.Type.Leave and not self.underMouse():
            self.dismiss()
        elif kind == QEvent.Type.Resize:
            self.dismiss()
        return False

    def hover(self, pos: QPoint) -> None:
        """The bar on the message at pos (viewport coordinates), or hidden over no message."""
        index = self.list_view.indexAt(pos)
        if not index.isValid():
            self.dismiss()
        elif index.row() != self.row or not self.isVisible():
            self.show_on(index)

    def show_on(self, index: QModelIndex) -> None:
        message: MessageView = self.list_view.model().view(index.row())
        names = set(self.available(message))
        for name, button in self.buttons.items():
            button.setVisible(name in names)
        copy = self.buttons["copy"]
        copy.setText(ACTIONS["copy"][0])
        if not copy.icon().isNull():
            copy.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        self.row = index.row()
        self.adjustSize()
        self._place(index)
        self.show()
        self.raise_()

    def _place(self, index: QModelIndex) -> None:
        message: MessageView = self.list_view.model().view(index.row())
        bubble = bubble_rect(self.list_view.visualRect(index), message.role)
        size = self.sizeHint()
        x = bubble.right() - size.width() - PAD
        y = bubble.bottom() - size.height() // 2  # across the bubble's bottom edge
        y = max(0, min(y, self.list_view.viewport().height() - size.height()))
        self.setGeometry(x, y, size.width(), size.height())

    def dismiss(self) -> None:
        if self.isVisible():
            self.hide()
        self.row = None

    def _rows_changed(self, top: QModelIndex, _bottom: QModelIndex, _roles=()) -> None:
        # A row that grows moves the rows under it: the bar on one of them would be stale.
        if self.row is not None and top.row() <= self.row:
            self.dismiss()

    def current(self) -> MessageView | None:
        model = self.list_view.model()
        if self.row is None or self.row >= model.rowCount():
            return None
        return model.view(self.row)

    def _clicked(self, name: str) -> None:
        message = self.current()
        if message is None:
            return
        if name == "copy":
            copy = self.buttons["copy"]
            copy.setText(COPIED)  # until the bar shows on a message again
            copy.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
            self.adjustSize()
            self._place(self.list_view.model().index(self.row, 0))
        self.triggered.emit(name, message)
