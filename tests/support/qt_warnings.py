"""Qt's warnings about shortcuts, recorded while a test runs (tests/conftest.py fails the
test on any): Qt only logs an ambiguous shortcut, and the key then does nothing."""

from __future__ import annotations

import sys
from types import TracebackType

from PySide6.QtCore import QMessageLogContext, QtMsgType, qInstallMessageHandler

AMBIGUOUS = "Ambiguous shortcut overload"


class AmbiguousShortcuts:
    """A Qt message handler that keeps the ambiguous-shortcut warnings and hands every
    message on to the handler it replaced (pytest-qt's capture, or Qt's own printing)."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self._previous = None

    def __enter__(self) -> AmbiguousShortcuts:
        self._previous = qInstallMessageHandler(self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        qInstallMessageHandler(self._previous)

    def _handle(self, mode: QtMsgType, context: QMessageLogContext, message: str) -> None:
        if AMBIGUOUS in message:
            self.messages.append(message)
        if self._previous is not None:
            self._previous(mode, context, message)
        else:
            print(message, file=sys.stderr)
