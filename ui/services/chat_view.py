"""What the chat use-cases (conversation_actions.py) ask of the view a conversation is shown
in: a tab, a compare pane or the split view's other half. Declared here so that the
use-cases depend on these few calls, not on a widget class."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from storage import NewDocument
from ui.widgets.chat.message_model import MessageView


class MessageList(Protocol):
    def set_messages(self, views: list[MessageView]) -> None: ...


class ChatView(Protocol):
    @property
    def conversation_id(self) -> int: ...

    @property
    def model(self) -> MessageList:
        """The messages on screen."""
        ...

    def set_busy(self, busy: bool) -> None:
        """A reply is being written: the composer's Send becomes Stop."""
        ...

    def set_state(self, text: str) -> None:
        """The status line under the messages ("queued", "ready", ...)."""
        ...

    def restore_unsent(self, text: str, documents: Sequence[NewDocument] | None = None) -> None:
        """A message that could not be stored goes back into the composer, files and all."""
        ...

    def confirm_delete(self, message_id: int, replies: int) -> None:
        """Asks (without a nested loop) before a message with replies under it is deleted."""
        ...
