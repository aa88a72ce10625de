"""One generation as the scheduler sees it: tokens, progress, priority. No llama here."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from inference.params import SamplingParams
from inference.spec.ngram import NgramIndex, NgramPool
from inference.spec.policy import Acceptance


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    PREFILLING = "prefilling"
    DECODING = "decoding"
    FINISHED_STOPPED = "finished_stopped"
    FINISHED_LENGTH = "finished_length"
    FINISHED_CANCELLED = "finished_cancelled"
    FINISHED_ERROR = "finished_error"

    @property
    def finished(self) -> bool:
        return self.name.startswith("FINISHED")


@dataclass(eq=False, slots=True)
class Request:
    """tokens holds prompt + generated tokens; num_computed of them are in the KV cache.

    There are no separate prefill and decode phases: each step feeds the next slice of
    tokens[num_computed:], a prompt chunk or the one token sampled last.
    """

    request_id: str
    tokens: list[int]
    sampling: SamplingParams
    priority: int = 0
    arrival_s: float = 0.0
    arrival_index: int = 0
    pin: bool = False
    num_prompt: int = field(init=False)
    num_computed: int = 0
    num_cached: int = 0  # prompt tokens that came from the prefix cache at admission
    seq: int | None = None
    status: RequestStatus = RequestStatus.WAITING
    admitted_s: float | None = None
    preemptions: int = 0
    # Speculative decoding: the index its drafts come from (made at its first draft) and
    # how its drafts have fared.
    drafter: NgramIndex | None = None
    acceptance: Acceptance = field(default_factory=Acceptance)
    # A draft offered but not verified (it did not pay): (the position it guessed, its
    # first token). What the model then wrote there tells how good the drafts are, for
    # free: a request whose drafts stopped paying learns when they would again.
    shadow: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        self.num_prompt = len(self.tokens)

    @property
    def output_tokens(self) -> list[int]:
        return self.tokens[self.num_prompt :]

    @property
    def num_output(self) -> int:
        return len(self.tokens) - self.num_prompt

    @property
    def num_uncomputed(self) -> int:
        return len(self.tokens) - self.num_computed

    @property
    def wants_output(self) -> bool:
        """False for prefill-only requests (pinning a prefix)."""
        return self.sampling.max_tokens != 0

    @property
    def reuse_limit(self) -> int:
        """How many tokens may come from the cache: the last must be computed for logits."""
        return len(self.tokens) - 1 if self.wants_output else len(self.tokens)

    @property
    def is_decoding(self) -> bool:
        return self.status is RequestStatus.DECODING

    @property
    def may_draft(self) -> bool:
        """Whether draft tokens can be verified for it: not for a grammar (its sampler is
        llama.cpp's chain) nor for log-probabilities (one row per token is reported)."""
        return self.sampling.grammar is None and self.sampling.logprobs is None

    def draft(self, max_tokens: int, pool: NgramPool | None = None) -> list[int]:
        """Prompt-lookup draft tokens that may follow its tokens, its own or (with the
        engine's pool, which its tokens then join) other requests' (the last unverified
        draft's guess is scored first)."""
        self.score_shadow()
        if self.drafter is None:
            self.drafter = NgramIndex(self.tokens, pool)
        return self.drafter.draft(max_tokens)

    def score_shadow(self) -> None:
        """The last draft offered but not verified, scored against what the model wrote
        at its position once it has: its acceptance rate learns without a verify row."""
        if self.shadow is not None:
            position, guess = self.shadow
            if position < len(self.tokens):
                self.acceptance.observe(1, 1 if self.tokens[position] == guess else 0)
                self.shadow = None

    def remember(self, pool: NgramPool) -> None:
        """All its tokens into the engine's pool (it finished: a later request that writes
        the same text drafts from it)."""
        if self.drafter is None:
            self.drafter = NgramIndex(self.tokens, pool)
        self.drafter.index_all()

    def append_token(self, token: int) -> None:
        self.tokens.append(token)
        self.status = RequestStatus.DECODING
