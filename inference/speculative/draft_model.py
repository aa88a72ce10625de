"""A draft model: a second, smaller model with the target's vocabulary that writes the draft
tokens the target then verifies (llama.cpp's `--model-draft`, LM Studio's draft models).

The proposer (proposer.py) asks it once a step for every decoding request that may draft;
the worker's LlamaDraftModel (inference/worker/draft_runner.py) runs it on a context of its
own, on the engine thread. It keeps no copy of the target's KV edits: it remembers which tokens each
sequence holds in its own cache and, on each call, keeps the longest prefix the request's
tokens still share and computes the rest (the text since its last draft, or a whole prompt
when a sequence changed hands). Its drafts are its greedy tokens: a point mass, so the
target's verification (SamplerSet.verify) keeps a sampled request's distribution exactly.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol


class DraftWant(NamedTuple):
    """One decoding request's ask: its sequence, whose it is, all its tokens (the last one
    not yet in the target's cache either), and the most draft tokens it may verify."""

    seq: int
    owner: str  # the request id: a sequence that changed hands is compared from its start
    tokens: list[int]
    limit: int


class DraftModel(Protocol):
    """What the proposer needs of a draft model."""

    def propose(self, wants: list[DraftWant]) -> list[list[int]]:
        """Draft tokens for each want (up to its limit; fewer where the draft model is
        unsure, none where it is still catching up with a long prompt)."""
        ...

    @property
    def step_s(self) -> float:
        """One draft step's seconds for a lone sequence, timed when the model loaded: what
        the planner starts from, before a draft step of a request was timed."""
        ...

    @property
    def last_steps(self) -> int:
        """How many of the last propose()'s decodes were draft steps (a token or two a
        sequence; those catching up with a prompt are not what a draft token costs)."""
        ...

    @property
    def last_step_s(self) -> float:
        """The seconds those draft steps took, together."""
        ...

    def close(self) -> None: ...
