"""Files dropped on a widget (a chat tab, the compare view): handed to a callable instead of
being typed in or ignored. An event filter, so any widget takes drops without a subclass."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QWidget

from ui.widgets.chat.attachment_chips import file_paths_of


class FileDrops(QObject):
    def __init__(self, widget: QWidget, dropped: Callable[[list[Path]], None]) -> None:
        super().__init__(widget)
        self.dropped = dropped
        widget.setAcceptDrops(True)
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if isinstance(event, (QDragEnterEvent, QDragMoveEvent, QDropEvent)):
            paths = file_paths_of(event.mimeData())
            if not paths:
                return False
            event.acceptProposedAction()
            if event.type() == QEvent.Type.Drop:
                self.dropped(paths)
            return True
        return False


def accept_file_drops(widget: QWidget, dropped: Callable[[list[Path]], None]) -> FileDrops:
    """widget takes dropped files (file URLs) and gives their paths to dropped."""
    return FileDrops(widget, dropped)
