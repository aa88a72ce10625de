"""How many draft tokens each decoding request verifies this step.

A step's cost grows with its tokens: t(T) = a + b*T over the batch, a and b learned from
the steps the engine runs (StepCost). A draft token pays when the tokens it is expected to
add outweigh the time it adds: with E tokens expected from the step so far, one more draft
token with acceptance chance g raises the step's rate E/t when g > E * b / t. A request's
j-th draft token is accepted with chance p**j (p its acceptance rate, learned per request:
a rejection discards the rest), so draft tokens are handed out greedily, best chance
first, while that holds. On a CPU already busy with 32 sequences b/t is large and few
drafts pay; a lone chat copying its prompt gets long ones.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

# A request's acceptance rate before it has drafted anything (prompt-lookup drafts that
# match 3+ tokens are usually right for a while), and how fast it follows new evidence.
PRIOR_ACCEPTANCE = 0.6
ACCEPTANCE_WEIGHT = 0.3
# Never worth a row below this chance, whatever the cost model says.
MIN_CHANCE = 0.05


@dataclass(slots=True)
class Acceptance:
    """One request's record of its drafts."""

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


class StepCost:
    """t(T) = a + b*T seconds for a decode step of T tokens, fitted online (recursive least
    squares with forgetting, so it follows a machine whose load changes)."""

    # The prior: a token costs half a one-token step (a CPU's batched matmuls; this
    # project's 2-core machine measured 10 ms for one token and 5 ms for each more). A GPU's
    # much cheaper rows are learned within a few steps of different sizes.
    def __init__(self, base_s: float = 0.010, per_token_s: float = 0.005, forget: float = 0.98) -> None:
        self.base_s = base_s
        self.per_token_s = per_token_s
        self._forget = forget
        # Sufficient statistics of the weighted fit (count, sums of T, T*T, t, T*t), seeded
        # with the prior as three one-token steps: a slope needs steps of other sizes.
        prior = base_s + per_token_s
        self._n, self._st, self._stt, self._sy, self._sty = 3.0, 3.0, 3.0, 3 * prior, 3 * prior

    def observe(self, n_tokens: int, seconds: float) -> None:
        f = self._forget
        self._n = f * self._n + 1
        self._st = f * self._st + n_tokens
        self._stt = f * self._stt + n_tokens * n_tokens
        self._sy = f * self._sy + seconds
        self._sty = f * self._sty + n_tokens * seconds
        var = self._n * self._stt - self._st * self._st
        if var <= 1e-9:  # every step had the same size: only the total is known
            return
        slope = (self._n * self._sty - self._st * self._sy) / var
        self.per_token_s = max(1e-6, slope)
        self.base_s = max(1e-6, (self._sy - self.per_token_s * self._st) / self._n)

    def seconds(self, n_tokens: int) -> float:
        return self.base_s + self.per_token_s * n_tokens


def draft_lengths(rates: list[float], available: list[int], n_tokens: int, cost: StepCost,
                  room: int) -> list[int]:
    """How many draft tokens each decoding request gets: rates[i] its acceptance rate,
    available[i] how many its drafter offers, n_tokens the step's tokens without drafts,
    room the most draft tokens the step can carry (batch and KV cells)."""
    lengths = [0] * len(rates)
    expected = float(len(rates))  # each decoding request yields its one token anyway
    total = n_tokens
    # (-chance of the next draft token, request): the best chance first.
    heap = [(-rate, i) for i, rate in enumerate(rates) if available[i] > 0 and rate >= MIN_CHANCE]
    heapq.heapify(heap)
    while heap and room > 0:
        neg_chance, i = heapq.heappop(heap)
        chance = -neg_chance
        t = cost.seconds(total)
        if chance <= expected * cost.per_token_s / t:
            break  # the best remaining token slows the step's rate: so would every other
        lengths[i] += 1
        expected += chance
        total += 1
        room -= 1
        if lengths[i] < available[i]:
            nxt = chance * rates[i]
            if nxt >= MIN_CHANCE:
                heapq.heappush(heap, (-nxt, i))
    return lengths


class DraftPlanner:
    """The scheduler's side of speculation: the most draft tokens a sequence may verify in
    a step, and the step cost that decides how many pay."""

    def __init__(self, max_draft: int, cost: StepCost | None = None) -> None:
        self.max_draft = max_draft
        self.cost = cost or StepCost()

    def lengths(self, rates: list[float], available: list[int], n_tokens: int, room: int) -> list[int]:
        return draft_lengths(rates, available, n_tokens, self.cost, room)
