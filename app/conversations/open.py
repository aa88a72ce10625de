"""The conversations a process has open, one ConversationSession each: what the window
keeps about a chat beyond its rows (its last prompt, what its tool round waits on, the calls
as the model wrote them) lives on its session, not in loose dicts beside it."""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.conversations.session import ConversationSession
from storage import ChatRepository, ConversationRecord


class OpenConversations:
    """A session per conversation this run touched, made on first use. model_label: the
    model name a new reply row records, for a conversation as it is stored."""

    def __init__(self, repo: ChatRepository, model_label: Callable[[ConversationRecord], str | None]) -> None:
        self.repo = repo
        self.model_label = model_label
        self._sessions: dict[int, ConversationSession] = {}
        # The window asks on the GUI thread and on the storage thread (a prompt built there):
        # one session a chat, whichever asks first.
        self._lock = threading.Lock()

    def session(self, conversation_id: int) -> ConversationSession:
        with self._lock:
            session = self._sessions.get(conversation_id)
            if session is None:
                session = self._sessions[conversation_id] = ConversationSession(self.repo, conversation_id,
                                                                                  self.model_label)
            return session

    def get(self, conversation_id: int) -> ConversationSession | None:
        """Its session, if this run has one (nothing is made)."""
        return self._sessions.get(conversation_id)

    def waiting(self) -> dict[int, str]:
        """The chats between a reply's turns, and what each waits on ("running add")."""
        with self._lock:
            return {i: s.waiting_on for i, s in self._sessions.items() if s.waiting_on}
