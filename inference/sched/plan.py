"""What the scheduler hands the worker each step: the chunks of the next llama_decode, and
the requests it sent back to the queue, ended or admitted on the way; and the draft tokens
the propose stage gives it to place in a step (Drafts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from inference.request import Request


class ScheduledChunk(NamedTuple):
    """One request's slice of a step (a tuple: several are built every step)."""

    request: Request
    start: int  # first position fed (== request.num_computed when scheduled)
    n_tokens: int  # of the request's own tokens
    wants_logits: bool
    is_decode: bool = False
    # Draft tokens fed after the decode token, each with logits: the worker samples every
    # row and keeps the drafts up to the first that differs from what was sampled there.
    draft: tuple[int, ...] = ()

    @property
    def tokens(self) -> list[int]:
        own = self.request.tokens[self.start : self.start + self.n_tokens]
        return own + list(self.draft) if self.draft else own

    @property
    def holds_image(self) -> bool:
        """Its tokens are an image's rows (a chunk is all text or all one piece's rows)."""
        return self.n_tokens > 0 and self.request.tokens[self.start] < 0

    @property
    def n_fed(self) -> int:
        """Tokens this chunk puts in the batch."""
        return self.n_tokens + len(self.draft)

    @property
    def n_logits(self) -> int:
        """Rows of the chunk, counted from its end, that need logits."""
        return 1 + len(self.draft) if self.wants_logits else 0

    @property
    def seq(self) -> int:
        seq = self.request.seq
        if seq is None:  # admission gives a request its sequence before any chunk exists
            raise RuntimeError(f"request {self.request.request_id} was scheduled without a sequence")
        return seq


class Drafts(NamedTuple):
    """The propose stage's draft tokens for a step, by the index of their decode chunk, and
    the seconds a draft model took to write them (0 for prompt lookup)."""

    tokens: dict[int, tuple[int, ...]]
    seconds: float = 0.0


@dataclass(slots=True)
class StepPlan:
    chunks: list[ScheduledChunk] = field(default_factory=list)
    preempted: list[Request] = field(default_factory=list)
    # Running alone, yet no cell left for its next token: it ends, its text kept.
    out_of_cells: list[Request] = field(default_factory=list)
    admitted: list[Request] = field(default_factory=list)
    # The most draft tokens the step may still carry (batch and KV cells), when requests decode.
    draft_room: int = 0
    n_draft: int = 0  # draft tokens in the chunks (the worker verifies them when > 0)
    draft_s: float = 0.0  # seconds the draft model took to write them (0 for prompt lookup)

    @property
    def num_tokens(self) -> int:
        """Tokens in the batch, draft tokens included."""
        return sum(c.n_fed for c in self.chunks)

    @property
    def num_decode_tokens(self) -> int:
        return sum(1 for c in self.chunks if c.is_decode)

    @property
    def num_prefill_tokens(self) -> int:
        return self.num_tokens - self.num_decode_tokens - self.n_draft

    @property
    def empty(self) -> bool:
        return not self.chunks
