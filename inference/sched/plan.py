"""What the scheduler hands the worker each step: the chunks of the next llama_decode, and
the requests it sent back to the queue, ended or admitted on the way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from inference.request import Request


class ScheduledChunk(NamedTuple):
    """One request's slice of a step (a tuple: several are built every step)."""

    request: Request
    start: int  # first position fed (== request.num_computed when scheduled)
    n_tokens: int
    wants_logits: bool
    is_decode: bool = False

    @property
    def tokens(self) -> list[int]:
        return self.request.tokens[self.start : self.start + self.n_tokens]

    @property
    def seq(self) -> int:
        seq = self.request.seq
        if seq is None:  # admission gives a request its sequence before any chunk exists
            raise RuntimeError(f"request {self.request.request_id} was scheduled without a sequence")
        return seq


@dataclass(slots=True)
class StepPlan:
    chunks: list[ScheduledChunk] = field(default_factory=list)
    preempted: list[Request] = field(default_factory=list)
    # Running alone, yet no cell left for its next token: it ends, its text kept.
    out_of_cells: list[Request] = field(default_factory=list)
    admitted: list[Request] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return sum(c.n_tokens for c in self.chunks)

    @property
    def num_decode_tokens(self) -> int:
        return sum(1 for c in self.chunks if c.is_decode)

    @property
    def num_prefill_tokens(self) -> int:
        return self.num_tokens - self.num_decode_tokens

    @property
    def empty(self) -> bool:
        return not self.chunks
