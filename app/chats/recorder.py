"""Saves an assistant reply while it streams: a checkpoint at most every second, and at
the end. A crash loses at most the last second; the partial reply reopens `interrupted`."""

from __future__ import annotations

import time
from collections.abc import Callable

from app.engines.finish import message_status
from inference.outputs import Delta
from storage import ChatRepository, MessageStatus

CHECKPOINT_EVERY_S = 1.0


class ReplyRecorder:
    def __init__(
        self,
        repo: ChatRepository,
        message_id: int,
        every_s: float = CHECKPOINT_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        text: str = "",
        tokens: int = 0,
    ) -> None:
        """text, tokens: what the message already holds when a reply is continued."""
        self.repo = repo
        self.message_id = message_id
        self.every_s = every_s
        self._clock = clock
        self._parts: list[str] = [text] if text else []
        self._tokens = tokens
        self._saved_at = clock()
        self._dirty = False
        self.finished = False

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def on_delta(self, delta: Delta) -> None:
        if delta.text:
            self._parts.append(delta.text)
            self._dirty = True
        self._tokens += len(delta.token_ids)
        if delta.finished:
            self.finish(delta)
        elif self._dirty and self._clock() - self._saved_at >= self.every_s:
            self.checkpoint()

    def checkpoint(self) -> None:
        self.repo.checkpoint(self.message_id, self.text, completion_tokens=self._tokens)
        self._saved_at = self._clock()
        self._dirty = False

    def finish(self, delta: Delta) -> None:
        self.finished = True
        stats = delta.stats
        self.repo.finish_reply(
            self.message_id,
            self.text,
            status=message_status(delta.finish_reason),
            error_text=delta.error,
            prompt_tokens=stats.prompt_tokens if stats else None,
            completion_tokens=stats.generated_tokens if stats else self._tokens,
            ttft_s=stats.ttft_s if stats else None,
            tokens_per_s=stats.decode_tok_s if stats else None,
        )

    def interrupt(self) -> None:
        """The reply stopped without a final delta."""
        self.finished = True
        self.repo.finish_reply(self.message_id, self.text, status=MessageStatus.INTERRUPTED)
