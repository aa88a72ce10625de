"""What a generation call's answer is made of, whichever API it speaks: the reply counted
from the engine's deltas (ChoiceTally), the call it belongs to (Call), and the writer that
turns them into one API's JSON answer or events (Reply).

generation.py runs every call the same way (prepare, submit, wait or stream, cancel on
disconnect); a Reply says only how its API writes what happened."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from app.chats.reasoning import Piece, ReasoningSplitter
from app.server.calls.engine_bridge import ChoiceDelta
from app.server.calls.parsing import Generation
from app.server.http.errors import ApiError
from inference import Delta, FinishReason


@dataclass
class ChoiceTally:
    """One choice's reply so far, counted from its deltas (the stats may never come: an
    engine process that dies mid-reply ends the request without them)."""

    parts: list[str] = field(default_factory=list)
    tokens: int = 0
    finish: FinishReason | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    generated: int | None = None  # from the stats, when they came
    stop_string: str | None = None  # the stop string that ended it, from the stats
    cached_tokens: int | None = None  # prompt tokens the prefix cache reused, from the stats
    logprobs: list = field(default_factory=list)  # the engine's TokenLogprob, one per token
    # The reply's reasoning (<think>...</think>) apart from its answer, as it streams: what
    # the last delta added to each (the chat API sends them as reasoning_content and content).
    reasoning: ReasoningSplitter = field(default_factory=ReasoningSplitter)
    piece: Piece = field(default_factory=Piece)
    # The answer so far (the reasoning left out), and how much of it went out as content: a
    # reply offered tools holds back what may be a call (openai/tool_reply.py).
    answer: str = ""
    sent: int = 0

    def add(self, delta: Delta) -> None:
        if delta.text:
            self.parts.append(delta.text)
        self.piece = self.reasoning.feed(delta.text, len(delta.token_ids))
        if delta.finished:  # what was held back as a possible marker is text after all
            tail = self.reasoning.finish()
            self.piece = Piece(self.piece.reasoning + tail.reasoning, self.piece.answer + tail.answer)
        self.answer += self.piece.answer
        self.logprobs.extend(delta.logprobs)
        self.tokens += len(delta.token_ids)
        if delta.finished:
            self.finish, self.error = delta.finish_reason, delta.error
            if delta.stats is not None:
                self.prompt_tokens, self.generated = delta.stats.prompt_tokens, delta.stats.generated_tokens
                self.stop_string = delta.stats.stop_string
                self.cached_tokens = delta.stats.cached_tokens

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def completion_tokens(self) -> int:
        return self.generated if self.generated is not None else self.tokens


@dataclass(frozen=True)
class Call:
    """One API call under way: its id (its first engine request's), the model's name, what
    was asked, and a tally per choice."""

    id: str
    model: str
    gen: Generation
    tallies: list[ChoiceTally]

    @property
    def prompt_tokens(self) -> int:
        """From the engine's stats once they came, else the prepared prompt's length."""
        counted = next((t.prompt_tokens for t in self.tallies if t.prompt_tokens is not None), None)
        if counted is not None:
            return counted
        tokens = self.gen.chat.prompt_tokens
        return len(tokens) if tokens is not None else 0


class Reply(Protocol):
    """How one API writes a call's answer. Stream events are bytes ready to send."""

    def answer(self, call: Call) -> dict:
        """The whole answer of a call that was not streamed."""
        ...

    def opening(self, call: Call) -> Iterator[bytes]:
        """The events before the first text."""
        ...

    def text(self, call: Call, item: ChoiceDelta) -> Iterator[bytes]:
        """A delta's new text (already added to its tally)."""
        ...

    def finish(self, call: Call, item: ChoiceDelta) -> Iterator[bytes]:
        """A choice that ended normally (stop, length, context full, cancelled)."""
        ...

    def closing(self, call: Call) -> Iterator[bytes]:
        """After every choice finished."""
        ...

    def error(self, call: Call, error: ApiError) -> bytes:
        """The event that ends a stream that failed after it began."""
        ...
