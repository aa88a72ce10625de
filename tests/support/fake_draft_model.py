"""A draft model without a model, for the proposer's side of draft-model speculation.

It drafts what the fake target's next_token would write after the request's tokens
(every `wrong_every`-th draft token made wrong instead, when set), as many as the want's
limit, and costs `step_s` on the shared fake clock per batched draft step, as the real
LlamaDraftModel runs one llama_decode a draft token for all sequences at once. It records
every want, so tests see what the proposer asked.
"""

from __future__ import annotations

from collections.abc import Callable

from inference.speculative.draft_model import DraftWant
from tests.support.fake_runner import EOS, FakeClock


class FakeDraftModel:
    def __init__(self, next_token: Callable[[list[int]], int], clock: FakeClock, step_s: float = 0.1,
                 wrong_every: int = 0) -> None:
        self.next_token = next_token
        self.clock = clock
        self.step_s = step_s  # a draft step's fake seconds (also what it "timed at load")
        self.wrong_every = wrong_every
        self.wants: list[DraftWant] = []
        self.last_steps = 0
        self.last_step_s = 0.0
        self._written = 0

    def propose(self, wants: list[DraftWant]) -> list[list[int]]:
        self.wants += wants
        drafts = [self._draft(list(w.tokens), w.limit) for w in wants]
        self.last_steps = max((len(d) for d in drafts), default=0)
        self.last_step_s = self.step_s * self.last_steps
        self.clock.now += self.last_step_s
        return drafts

    def _draft(self, context: list[int], limit: int) -> list[int]:
        draft: list[int] = []
        while len(draft) < limit:
            token = self.next_token(context)
            self._written += 1
            if self.wrong_every and self._written % self.wrong_every == 0:
                token = token + 1 if token + 1 != EOS else token + 2
            draft.append(token)
            context.append(token)
        return draft

    def close(self) -> None:
        pass
