"""Which document prefixes the engines keep pinned: the system block of whole documents
stays in the KV cache (and in the disk prompt cache) while an open chat uses it, and goes
back to being evictable when the last such chat closes or moves on to another block."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Protocol


class Pinning(Protocol):
    def pin_system_prompt(self, text: str) -> None: ...

    def unpin_system_prompt(self, text: str) -> None: ...


class DocumentPins:
    """Counts the open chats using each (engine, block); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_chat: dict[int, tuple[Pinning, str]] = {}
        self._users: Counter[tuple[int, str]] = Counter()

    def use(self, conversation_id: int, engine: Pinning, block: str) -> None:
        """The chat's prompt now begins with block on engine: pin it (a no-op for the engine
        when it is pinned already), and unpin what the chat used before if no one else does."""
        with self._lock:
            if self._by_chat.get(conversation_id) == (engine, block):
                return
            released = self._drop(conversation_id)
            self._by_chat[conversation_id] = (engine, block)
            self._users[(id(engine), block)] += 1
        engine.pin_system_prompt(block)
        if released is not None:
            released[0].unpin_system_prompt(released[1])

    def release(self, conversation_id: int) -> None:
        """The chat was closed."""
        with self._lock:
            released = self._drop(conversation_id)
        if released is not None:
            released[0].unpin_system_prompt(released[1])

    def pinned(self) -> set[str]:
        with self._lock:
            return {block for (_, block), n in self._users.items() if n > 0}

    def _drop(self, conversation_id: int) -> tuple[Pinning, str] | None:
        """Forget the chat's block; returns it when no other chat uses it (to unpin)."""
        held = self._by_chat.pop(conversation_id, None)
        if held is None:
            return None
        key = (id(held[0]), held[1])
        self._users[key] -= 1
        if self._users[key] > 0:
            return None
        del self._users[key]
        return held
