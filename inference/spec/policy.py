"""How many draft tokens each decoding request verifies this step.

A step's cost grows with its tokens: t(T) over the batch, learned from the steps the
engine runs (StepCost). A draft token pays when the tokens it is expected to add outweigh
the time it adds: with E tokens expected from the step so far, one more draft token with
acceptance chance g, adding d seconds, raises the step's rate E/t when g > E * d / t. A request's
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
# A draft token must pay this much more than it costs: the cost table is noisy, and a
# draft that only breaks even makes the step's latency worse for nothing.
SAFETY = 1.15
# A step size whose cost has not been measured is tried with one draft token, when the
# best draft on offer is at least this likely: one step teaches what the guess cannot.
PROBE_CHANCE = 0.8
STALE_STEPS = 2000
SCORE_EVERY = 2  # see DraftPlanner.worth_drafting


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
    """t(T): the seconds of a decode step of T tokens (every row with logits, as draft rows
    have), learned from the steps the engine runs: a moving average per T, interpolated
    between the sizes seen. Not a straight line: on a CPU one token costs a memory-bound
    pass over the weights (14 ms on this project's 2-core machine) and each further token
    7-10 ms of compute, while a GPU's further rows are nearly free. Past the sizes seen a
    step is guessed at the largest one's cost per token (a guess that makes drafts look
    dear: the planner probes a size before it relies on it). A size not seen for STALE_STEPS
    steps counts as unseen again: the machine's load changes."""

    def __init__(self, base_s: float = 0.010, per_token_s: float = 0.005, weight: float = 0.2) -> None:
        self._prior = (base_s, per_token_s)
        self._weight = weight
        self._seconds: dict[int, float] = {}
        self._seen_at: dict[int, int] = {}
        self._steps = 0

    def observe(self, n_tokens: int, seconds: float) -> None:
        """A decode step of n_tokens took seconds (steps holding prompt chunks are not
        what a draft row costs: prompt rows need no logits and batch better)."""
        if n_tokens <= 0:
            return
        self._steps += 1
        old = self._seconds.get(n_tokens)
        self._seconds[n_tokens] = seconds if old is None else old + self._weight * (seconds - old)
        self._seen_at[n_tokens] = self._steps

    def seen(self, n_tokens: int) -> bool:
        at = self._seen_at.get(n_tokens)
        return at is not None and self._steps - at < STALE_STEPS

    def seconds(self, n_tokens: int) -> float:
        known = self._seconds
        if n_tokens in known:
            return known[n_tokens]
        below = max((t for t in known if t < n_tokens), default=None)
        above = min((t for t in known if t > n_tokens), default=None)
        if below is not None and above is not None:
            share = (n_tokens - below) / (above - below)
            return known[below] + share * (known[above] - known[below])
        if below is not None:  # past the largest size seen: at its cost per token
            return known[below] * n_tokens / below
        base, per_token = self._prior
        if above is not None:
            return max(1e-6, known[above] - (above - n_tokens) * per_token)
        return base + per_token * (n_tokens - 1)

    def extra(self, n_tokens: int) -> float:
        """What one more token adds to a step of n_tokens (never less than nothing)."""
        return max(1e-9, self.seconds(n_tokens + 1) - self.seconds(n_tokens))


def draft_lengths(rates: list[float], available: list[int], n_tokens: int, cost: StepCost,
                  room: int) -> list[int]:
    """How many draft tokens each decoding request gets: rates[i] its acceptance rate,
    available[i] how many its drafter offers, n_tokens the step's tokens without drafts,
    room the most draft tokens the step can carry (batch and KV cells)."""
    lengths = [0] * len(rates)
    probed = False
    expected = float(len(rates))  # each decoding request yields its one token anyway
    total = n_tokens
    # (-chance of the next draft token, request): the best chance first.
    heap = [(-rate, i) for i, rate in enumerate(rates) if available[i] > 0 and rate >= MIN_CHANCE]
    heapq.heapify(heap)
    while heap and room > 0:
        neg_chance, i = heapq.heappop(heap)
        chance = -neg_chance
        probe = not probed and chance >= PROBE_CHANCE and not cost.seen(total + 1)
        if not probe and chance * cost.seconds(total) <= expected * cost.extra(total) * SAFETY:
            break  # the best remaining token slows the step's rate: so would every other
        probed = probed or probe
        lengths[i] += 1
        expected += chance
        total += 1
        room -= 1
        if lengths[i] < available[i]:
            nxt = chance * rates[i]
            if nxt >= MIN_CHANCE:
                heapq.heappush(heap, (-nxt, i))
    return lengths


class RateGuard:
    """What speculation really did, per number of decoding requests: the tokens per second
    of decode steps with drafts against those without. Where the drafts' rate falls below
    the plain one (the cost model was wrong, the copies stopped), drafting pauses there for
    HOLD_STEPS steps, then is tried again. The planner's arithmetic decides how many drafts
    pay; this checks that they did."""

    MIN_STEPS = 8
    HOLD_STEPS = 500
    WEIGHT = 0.1

    def __init__(self) -> None:
        self._rates: dict[tuple[int, bool], list[float]] = {}  # (n, drafted) -> [tokens, seconds, steps]
        self._paused_until: dict[int, int] = {}
        self._step = 0

    def allows(self, n_decoding: int) -> bool:
        return self._step >= self._paused_until.get(n_decoding, 0)

    def record(self, n_decoding: int, drafted: bool, tokens: int, seconds: float) -> None:
        self._step += 1
        stats = self._rates.setdefault((n_decoding, drafted), [float(tokens), seconds, 0.0])
        stats[0] += self.WEIGHT * (tokens - stats[0])
        stats[1] += self.WEIGHT * (seconds - stats[1])
        stats[2] += 1
        plain = self._rates.get((n_decoding, False))
        spec = self._rates.get((n_decoding, True))
        if plain is None or spec is None or min(plain[2], spec[2]) < self.MIN_STEPS:
            return
        if spec[0] / spec[1] < plain[0] / plain[1]:
            self._paused_until[n_decoding] = self._step + self.HOLD_STEPS
            del self._rates[(n_decoding, True)]


class DraftPlanner:
    """The scheduler's side of speculation: the most draft tokens a sequence may verify in
    a step, the step cost that decides how many pay, and the guard that checks they did."""

    def __init__(self, max_draft: int, cost: StepCost | None = None) -> None:
        self.max_draft = max_draft
        self.cost = cost or StepCost()
        self.guard = RateGuard()
        self._asked = 0

    def lengths(self, rates: list[float], available: list[int], n_tokens: int, room: int) -> list[int]:
        return draft_lengths(rates, available, n_tokens, self.cost, room)

    def worth_drafting(self, best_rate: float, n_decoding: int, n_tokens: int) -> bool:
        """Whether a step could give a draft token at all: the guard allows it and the
        likeliest request's first token would pay (or probe an unmeasured size). Drafting
        is skipped otherwise, but for every SCORE_EVERY-th step, whose offers are only scored
        against what the model writes (so rates stay current for when drafts would pay)."""
        self._asked += 1
        if not self.guard.allows(n_decoding):
            return False
        cost = self.cost
        pays = best_rate * cost.seconds(n_tokens) > n_decoding * cost.extra(n_tokens) * SAFETY
        probe = best_rate >= PROBE_CHANCE and not cost.seen(n_tokens + 1)
        return pays or probe or self._asked % SCORE_EVERY == 0

    def observe(self, n_decoding: int, n_tokens: int, n_draft: int, generated: int, seconds: float) -> None:
        """A decode step (no prompt chunks): its size, drafts, tokens made and time."""
        self.cost.observe(n_tokens, seconds)
        self.guard.record(n_decoding, n_draft > 0, generated, seconds)
