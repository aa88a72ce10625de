"""Saves an assistant reply while it streams: a checkpoint at most every second, and at
the end. A crash loses at most the last second; the partial reply reopens `interrupted`.

Another process may hold the database's write lock (an import, a second chat): a checkpoint
that finds it locked (or the disk full) is skipped (the next one, or the end, saves the text), and the end is
tried again with backoff for up to FINISH_RETRY_S, so a reply is never left `streaming`
with its tail lost because of a busy moment.

What it saves is the reply's ReplyText: in the desktop app the buffer the presenter draws
from, filled by the deltas' reader thread before each delta is handed here (so it holds at
least that delta's text); in the CLI one of its own that it fills itself."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from app.chats.reply_text import ReplyText
from app.engines.finish import message_status
from inference import Delta, FinishReason
from storage import ChatRepository, DatabaseBusy, DiskFull, MessageStatus, SourceRecord, retry_locked

log = logging.getLogger(__name__)

CHECKPOINT_EVERY_S = 1.0
FINISH_RETRY_S = 30.0  # the end of a reply waits this long at most for another writer


class ReplyRecorder:
    def __init__(
        self,
        repo: ChatRepository,
        message_id: int,
        every_s: float = CHECKPOINT_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        text: str = "",
        tokens: int = 0,
        finish_retry_s: float = FINISH_RETRY_S,
        reply: ReplyText | None = None,
        cite: Callable[[str], Sequence[SourceRecord]] | None = None,
    ) -> None:
        """text, tokens: what the message already holds when a reply is continued.
        reply: the reply's text shared with whoever shows it, who appends each delta's text
        to it before handing the delta here (it then holds that text already); None: the
        recorder keeps its own, starting from text, and appends each delta's text itself.
        cite: the reply's sources given its final text (which excerpts it cites: with_cited),
        stored with it at the end; None: its sources stay as they are."""
        if reply is not None and text:
            raise ValueError("a shared reply text starts with the message's text itself")
        self.repo = repo
        self.message_id = message_id
        self.every_s = every_s
        self.finish_retry_s = finish_retry_s
        self._clock = clock
        self.reply = reply if reply is not None else ReplyText(text)
        self._fills = reply is None
        self._tokens = tokens
        self._saved_at = clock()
        self._saved_end = self.reply.end  # what the message holds in storage already
        self.cite = cite
        self.finished = False
        # The end's fields while they are not stored (a full disk): save_end_again tries them.
        self._unsaved_end: dict | None = None

    @property
    def text(self) -> str:
        return self.reply.text()

    def on_delta(self, delta: Delta) -> None:
        if self._fills:
            self.reply.append(delta.text)
        self._tokens += len(delta.token_ids)
        if delta.finished:
            self.finish(delta)
        elif self.reply.end > self._saved_end and self._clock() - self._saved_at >= self.every_s:
            self.checkpoint()

    def checkpoint(self) -> None:
        """One try (SQLite's busy timeout included); locked: the text stays to be saved."""
        text, end = self.reply.upto()
        try:
            retry_locked(lambda: self.repo.checkpoint(self.message_id, text, completion_tokens=self._tokens),
                         "checkpoint the reply", budget_s=0)
        except DatabaseBusy:
            log.info("checkpoint of message %d skipped: the database is locked", self.message_id)
        except DiskFull:  # the text stays in memory: the next checkpoint, or the end, saves it
            log.warning("checkpoint of message %d skipped: the disk is full", self.message_id)
        else:
            self._saved_end = end
        self._saved_at = self._clock()

    def finish(self, delta: Delta) -> None:
        self.finished = True
        stats = delta.stats
        self._save_end(
            # a finished delta always has its reason; one without is kept as an error
            status=message_status(delta.finish_reason or FinishReason.ERROR),
            error_text=delta.error,
            prompt_tokens=stats.prompt_tokens if stats else None,
            completion_tokens=stats.generated_tokens if stats else self._tokens,
            ttft_s=stats.ttft_s if stats else None,
            tokens_per_s=stats.decode_tok_s if stats else None,
        )

    def interrupt(self) -> None:
        """The reply stopped without a final delta."""
        self.finished = True
        self._save_end(status=MessageStatus.INTERRUPTED)

    @property
    def end_unsaved(self) -> bool:
        """The reply ended but its end is not in storage yet (the disk was full)."""
        return self._unsaved_end is not None

    def save_end_again(self) -> bool:
        """Try the end's save again: True once it is stored; DiskFull while the disk is full."""
        if self._unsaved_end is not None:
            self._save_end(**self._unsaved_end)
        return True

    def _save_end(self, **fields) -> None:
        """The final text and state, tried again while the database is locked; DatabaseBusy
        after FINISH_RETRY_S (the reply then reopens `interrupted` at its last checkpoint).
        DiskFull leaves them in memory for save_end_again."""
        self._unsaved_end = fields
        text = self.text
        sources = self.cite(text) if self.cite is not None else None
        retry_locked(lambda: self.repo.finish_reply(self.message_id, text, sources=sources, **fields),
                     "save the reply", budget_s=self.finish_retry_s)
        self._unsaved_end = None
