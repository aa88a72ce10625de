"""One request's drafting, kept by the proposer: the n-gram index its lookup drafts come
from, how its drafts have fared, and its last draft offered but not verified."""

from __future__ import annotations

from dataclasses import dataclass

from inference.request import Request
from inference.speculative.ngram import NgramIndex, NgramPool

# A request's acceptance rate before it has drafted anything (prompt-lookup drafts that
# match 3+ tokens are usually right for a while), and how fast it follows new evidence.
PRIOR_ACCEPTANCE = 0.6
ACCEPTANCE_WEIGHT = 0.3


@dataclass(slots=True)
class Acceptance:
    """A record of drafts verified: tokens drafted and kept, and the per-token acceptance
    rate they show (one request's, or the engine's pool drafts')."""

    rate: float = PRIOR_ACCEPTANCE
    drafted: int = 0
    accepted: int = 0

    def observe(self, drafted: int, accepted: int) -> None:
        """A step verified `drafted` tokens of this request and kept `accepted`."""
        if drafted <= 0:
            return
        self.drafted += drafted
        self.accepted += accepted
        # Per-token acceptance p from accepted-of-drafted: a run of a kept tokens then a
        # miss (or the end) is what p**a * (1 - p) describes; a/(a+1) is its estimate.
        seen = accepted / (accepted + (1 if accepted < drafted else 0)) if accepted else 0.0
        self.rate += ACCEPTANCE_WEIGHT * (seen - self.rate)


class RequestDrafts:
    """The drafting state of one request (it lives as long as the request runs)."""

    __slots__ = ("acceptance", "index", "request", "shadow")

    def __init__(self, request: Request) -> None:
        self.request = request
        self.index: NgramIndex | None = None  # made at its first lookup draft
        self.acceptance = Acceptance()
        # A draft offered but not verified (it did not pay): (the position it guessed, its
        # first token). What the model then wrote there tells how good the drafts are, for
        # free: a request whose drafts stopped paying learns when they would again.
        self.shadow: tuple[int, int] | None = None

    @property
    def from_pool(self) -> bool:
        """Its last lookup draft came from the engine's pool."""
        return self.index is not None and self.index.from_pool

    def draft(self, max_tokens: int, pool: NgramPool | None = None) -> list[int]:
        """Prompt-lookup draft tokens that may follow its tokens, its own or (with the
        engine's pool, which its tokens then join) other requests' (the last unverified
        draft's guess is scored first)."""
        self.score_shadow()
        if self.index is None:
            self.index = NgramIndex(self.request.tokens, pool)
        return self.index.draft(max_tokens)

    def score_shadow(self) -> None:
        """The last draft offered but not verified, scored against what the model wrote
        at its position once it has: its acceptance rate learns without a verify row."""
        if self.shadow is not None:
            position, guess = self.shadow
            tokens = self.request.tokens
            if position < len(tokens):
                self.acceptance.observe(1, 1 if tokens[position] == guess else 0)
                self.shadow = None

    def remember(self, pool: NgramPool) -> None:
        """All its tokens into the engine's pool (it finished: a later request that writes
        the same text drafts from it)."""
        if self.index is None:
            self.index = NgramIndex(self.request.tokens, pool)
        self.index.index_all()
