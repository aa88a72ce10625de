"""How many draft tokens each decoding request verifies this step.

A step's cost grows with its tokens: t(T) over the batch, learned from the steps the
engine runs (the engine's StepCost, inference/sched/step_cost.py, which the step budget
reads too). It is far from a straight line on a CPU: measured on this project's
2-core machine, SmolLM2-135M's step of 1 token takes 10 ms, of 2 tokens 18 ms, of 16 tokens
84 ms; Gemma 3 270M's 12, 26 and 68 ms (its 262k-token vocabulary makes every row with
logits dear, and llama.cpp's matrix kernels change at 8 rows or so). So the question is not
whether one more draft token pays for itself (the second row never does there) but which
step size makes the most tokens per second: a lone chat copying its prompt verifies 15
drafts in 68 ms rather than 1 in 26.

Draft tokens are handed out best chance first (a request's j-th draft token is kept with
chance p**j, p its acceptance rate: a rejection discards the rest), and of those prefixes
the one with the highest expected tokens per second wins, when it beats the step without
drafts by a margin (5% for a lone chat, 15% in a batch). A step size not measured yet is
probed once, on a ladder of sizes, when the drafts that would fill it are likely: one step
teaches what no guess can.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from inference.sched.step_cost import StepCost
from inference.speculative.draft_model import DraftModel

# Never worth a row below this chance, whatever the cost model says.
MIN_CHANCE = 0.05
# Drafts must promise this much more than the plain step's rate: the cost table is noisy,
# and a draft that only breaks even makes the step's latency worse for nothing. Where
# several requests decode, more: every one of them waits for the longer step while only the
# drafting ones gain, the gain on offer is small (SmolLM2 on this CPU: 8 rows cost 49 ms,
# 12 rows 63 ms), and the acceptance estimates erred by about that much (8 chats copying a
# file: drafted steps predicted 11.2 tokens, made 8.8-10.5; with a 5% margin they ran at
# 0.90x of no speculation in three runs of chorus bench --spec-rounds 3).
SAFETY = 1.05
BATCH_SAFETY = 1.15
# Drafts that make the step at most this much dearer are given even when they do not pay
# (their requests end sooner at almost no one's cost): on a GPU a few more rows cost next to
# nothing; on this CPU one more row costs 3-7% of a step of 8 to 32 rows, so never.
FREE_SHARE = 0.02

# An unmeasured step size is probed when the drafts that fill it are on average at least
# this likely; the sizes probed (the cost is interpolated between them).
PROBE_CHANCE = 0.8
PROBE_SIZES = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
SCORE_EVERY = 2  # see DraftPlanner.worth_drafting
# A draft model's scoring offer costs a draft-model step (and its catching up with the
# text since), not a dictionary lookup: it is asked for one far less often.
SCORE_EVERY_MODEL = 4
SCORE_SHARE = 0.05
# A draft model whose step costs more than this share of the target's one-token step is
# never asked: it must compute every prompt and token the target does before its first
# draft, and its drafts cannot pay that back (llama.cpp's advice: a draft model several
# times smaller than its target). SmolLM2-135M drafting for itself costs 0.7-0.9 of a step.
MAX_DRAFT_SHARE = 0.5
UNUSED_DECAY = 0.98  # per decode step: the draft model's unused time is judged over ~50 steps
# What one draft-model step is taken to cost when the model gave no timing of its own: a
# draft model is chosen for being several times cheaper than its target (a fifth of the
# prior 1-token step).
PRIOR_DRAFT_STEP_S = 0.002


def margin(n_decoding: int) -> float:
    """How much better than the plain step a step with drafts must promise to be."""
    return SAFETY if n_decoding <= 1 else BATCH_SAFETY


def _allocation(rates: list[float], available: list[int], room: int) -> tuple[list[int], list[float]]:
    """Draft tokens in the order of their chance of being kept, best first: for each, its
    request and its chance (a request's j-th token is kept with chance rate**j)."""
    owners: list[int] = []
    chances: list[float] = []
    heap = [(-rate, i) for i, rate in enumerate(rates) if available[i] > 0 and rate >= MIN_CHANCE]
    heapq.heapify(heap)
    given = [0] * len(rates)
    while heap and len(owners) < room:
        neg_chance, i = heapq.heappop(heap)
        owners.append(i)
        chances.append(-neg_chance)
        given[i] += 1
        nxt = -neg_chance * rates[i]
        if given[i] < available[i] and nxt >= MIN_CHANCE:
            heapq.heappush(heap, (-nxt, i))
    return owners, chances


def best_draft_count(chances: list[float], n_decoding: int, n_tokens: int, cost: StepCost,
                     write_s: float = 0.0) -> tuple[int, bool]:
    """How many of the draft tokens (their chances, best first) the step should carry, and
    whether that is a probe: the count whose expected tokens per second is highest, if that
    beats the plain step's by margin(); else an unmeasured size above it to probe, when its
    drafts are likely; else 0. write_s: what writing each draft token costs (a draft
    model's step; prompt lookup's is nothing)."""
    plain = n_decoding / cost.seconds(n_tokens)
    best, best_rate = 0, plain * margin(n_decoding)
    expected = float(n_decoding)  # each decoding request yields its one token anyway
    for k, chance in enumerate(chances, start=1):
        expected += chance
        rate = expected / (cost.seconds(n_tokens + k) + k * write_s)
        if rate > best_rate:
            best, best_rate = k, rate
    if best == 0:  # none pays: as many as cost next to nothing (a GPU's further rows)
        while best < len(chances) and cost.seconds(n_tokens + best + 1) + (best + 1) * write_s <= (
                (1.0 + FREE_SHARE) * cost.seconds(n_tokens)):
            best += 1
    kept = 0.0
    for k, chance in enumerate(chances, start=1):
        kept += chance
        size = n_tokens + k
        # A probe's step costs at least what the largest size measured below it did (a step
        # is no cheaper for holding more rows): with what writing its drafts costs, even
        # that must beat the plain rate.
        could_pay = (n_decoding + kept) / (cost.floor(size) + k * write_s) > plain * margin(n_decoding)
        if k > best and kept / k >= PROBE_CHANCE and size in _PROBED and not cost.seen(size) and could_pay:
            return k, True
    return best, False


_PROBED = frozenset(PROBE_SIZES)


def draft_lengths(rates: list[float], available: list[int], n_tokens: int, cost: StepCost,
                  room: int, n_decoding: int | None = None) -> list[int]:
    """How many draft tokens each request with a draft on offer gets: rates[i] its
    acceptance rate, available[i] how many its drafter offers, n_tokens the step's tokens
    without drafts, room the most draft tokens the step can carry (batch and KV cells),
    n_decoding the step's decoding requests, those without an offer too (each makes its
    one token anyway; default: those with one)."""
    return planned_drafts(rates, available, n_tokens, cost, room, n_decoding=n_decoding).lengths


def kept_token_value(rates: list[float], n_decoding: int) -> float:
    """What a kept draft token is worth against a token the step makes anyway (1). The
    decoding requests run until the last is done, so drafts shorten the run only as far as
    all of them draft: a request that drafts while the others do not ends sooner and leaves
    the last steps a row lighter, no step fewer. So a kept token counts for the coverage of
    the step's drafting, the expected first draft tokens kept over the decoding requests (a
    lone chat's: 1, a whole step saved). Measured on this project's CPU, 8 chats, a few of
    them drafting (the chat workload: chorus bench --chats 8 --system-tokens 1000
    --max-tokens 128 --warm --speculative lookup --spec-rounds 6): 0.92x of speculation off
    with kept tokens counted whole, 0.95x counting the rows saved at their marginal cost,
    1.00x by coverage (no draft then); 8 chats all copying (the edit workload) still draft:
    Gemma 3 1.19x, SmolLM2 1.00x (0.96-0.97x before)."""
    if n_decoding <= 1:
        return 1.0
    return min(1.0, sum(rates) / n_decoding)


class DraftPlan(NamedTuple):
    lengths: list[int]  # draft tokens per request with an offer
    probe: bool  # the step probes an unmeasured size
    expected: float  # the draft tokens expected kept, by the requests' rates alone


def planned_drafts(rates: list[float], available: list[int], n_tokens: int, cost: StepCost,
                   room: int, trust: float = 1.0, n_decoding: int | None = None) -> DraftPlan:
    """draft_lengths, with each chance scaled by trust (how far the rates' predictions have
    come true), and what the plan expects."""
    owners, chances = _allocation(rates, available, room)
    decoding = len(rates) if n_decoding is None else n_decoding
    value = kept_token_value(rates, decoding)
    count, probe = best_draft_count([c * trust * value for c in chances], decoding, n_tokens, cost)
    lengths = [0] * len(rates)
    for i in owners[:count]:
        lengths[i] += 1
    return DraftPlan(lengths, probe, sum(chances[:count]))


class RateGuard:
    """What speculation really did, per number of decoding requests: the tokens per second
    of the last WINDOW decode steps with drafts against those of steps without. Where the
    drafts' rate falls below the plain one (the cost model was wrong, the copies stopped),
    drafting pauses there for a while (below), then is tried again. The planner's
    arithmetic decides how many drafts pay; this checks that they did. Probe steps, which
    try a step size to learn its cost, are not counted: they are bets made on purpose, and a
    few early misses must not stop a copy that pays from then on.

    Both rates must be measured under the same neighbours: on a shared machine a step's
    time moves with the other programs' load (this project's 2-core VM beside two busy
    processes: rounds of the same bench 2.2x apart), and a copy that drafts for hundreds of
    steps would otherwise be judged against plain steps from before it, a quieter or busier
    minute ago. So drafts count as far ahead only against the plain steps of the last
    RECENT steps (by CLOSE_CALL times their rate), and a close call is judged only against
    plain steps run within the drafted window's span. Where there are too few of either
    (one; MIN_CONTROLS), the next step is a control, run without drafts: a copy far ahead
    pays about one step in RECENT for it, a close call three in a window.

    A pause that was wrong costs the whole gain for its length, and under a busy machine's
    noise a verdict is sometimes wrong (a lone chat's lookup beside two `yes`: two rounds in
    six paused for the rest of their reply): the first pause is short (FIRST_HOLD steps),
    each one that follows a losing retry twice as long, up to HOLD_STEPS; a window that pays
    starts the count again."""

    WINDOW = 12
    PLAIN_WINDOW = 6
    MIN_CONTROLS = 3
    CLOSE_CALL = 1.25
    RECENT = 48
    FIRST_HOLD = 64
    HOLD_STEPS = 500

    def __init__(self) -> None:
        # n -> the last steps as (step number, tokens, seconds), without and with drafts
        self._plain: dict[int, deque[tuple[int, int, float]]] = {}
        self._drafted: dict[int, deque[tuple[int, int, float]]] = {}
        self._control_due: set[int] = set()
        self._paused_until: dict[int, int] = {}
        self._hold: dict[int, int] = {}  # n -> the next pause's length
        self._step = 0

    def allows(self, n_decoding: int) -> bool:
        """Whether this step may draft: not paused, and no control step due."""
        return self._step >= self._paused_until.get(n_decoding, 0) and n_decoding not in self._control_due

    def record(self, n_decoding: int, drafted: bool, tokens: int, seconds: float) -> None:
        self._step += 1
        sample = (self._step, tokens, seconds)
        if not drafted:
            self._plain.setdefault(n_decoding, deque(maxlen=self.PLAIN_WINDOW)).append(sample)
            self._control_due.discard(n_decoding)
            return
        window = self._drafted.setdefault(n_decoding, deque(maxlen=self.WINDOW))
        window.append(sample)
        if len(window) < self.WINDOW:
            return
        plain = self._plain.get(n_decoding, ())
        drafted_rate = _rate(window)
        recent = [s for s in plain if s[0] > self._step - self.RECENT]
        if recent and drafted_rate >= self.CLOSE_CALL * _rate(recent):
            self._hold.pop(n_decoding, None)
            return  # far ahead: no likely swing of the load since could turn that
        controls = [s for s in plain if s[0] >= window[0][0]]
        if len(controls) < self.MIN_CONTROLS:
            self._control_due.add(n_decoding)
        elif drafted_rate < _rate(controls):
            hold = self._hold.get(n_decoding, self.FIRST_HOLD)
            self._paused_until[n_decoding] = self._step + hold
            self._hold[n_decoding] = min(2 * hold, self.HOLD_STEPS)
            window.clear()
        else:
            self._hold.pop(n_decoding, None)


def _rate(steps: Iterable[tuple[int, int, float]]) -> float:
    """Tokens per second over these (step number, tokens, seconds)."""
    tokens = seconds = 0.0
    for _, t, s in steps:
        tokens, seconds = tokens + t, seconds + s
    return tokens / max(1e-9, seconds)


class DraftPlanner:
    """How many draft tokens pay in a step: the most a sequence may verify, the step cost
    (the engine's, shared with the step budget) that decides how many pay, and the guard
    that checks they did. The proposer (proposer.py) asks it.

    It also checks the requests' rates: per number of decoding requests, `trust` follows
    the draft tokens kept against those the rates expected (a moving average, at most 1),
    and scales every chance by it. A lone chat copying its prompt keeps what its rate says;
    8 chats whose first draft tokens were each right 9 times in 10 when scored kept a third
    of them when drafted together (SmolLM2, the edit workload), and stop drafting after a
    few such steps instead of after the guard's window."""

    # A plan expecting EVIDENCE_TOKENS kept tokens or more moves trust by TRUST_WEIGHT of the
    # way; a smaller one by its share of that (one draft token's miss is a coin's toss).
    TRUST_WEIGHT = 0.3
    EVIDENCE_TOKENS = 4.0
    MIN_TRUST = 0.05
    # Each decode step brings trust this share of the way back to 1: distrust that
    # stopped all drafting could otherwise never be revised (a retry every few dozen steps).
    TRUST_RECOVERY = 0.02

    def __init__(self, max_draft: int, cost: StepCost | None = None, model: DraftModel | None = None) -> None:
        self.max_draft = max_draft
        self.cost = cost or StepCost()
        self.model = model  # a draft model writes the drafts; None: prompt lookup does
        # One draft-model step, a moving average: from the step timed when it loaded.
        self.draft_step_s = model.step_s if model is not None and model.step_s > 0 else PRIOR_DRAFT_STEP_S
        self._draft_timed = False
        self._unused_s = 0.0  # decaying sums: see observe()
        self._stepped_s = 0.0
        self.guard = RateGuard()
        self._asked = 0
        self._probing = False  # this step's drafts probe an unmeasured size
        self._expected = 0.0  # the draft tokens this step's plan expects kept (unscaled)
        self._trust: dict[int, float] = {}

    def trust(self, n_decoding: int) -> float:
        return self._trust.get(n_decoding, 1.0)

    def lengths(self, rates: list[float], available: list[int], n_tokens: int, room: int,
                n_decoding: int | None = None) -> list[int]:
        """Draft tokens per request with an offer (see draft_lengths)."""
        decoding = len(rates) if n_decoding is None else n_decoding
        plan = planned_drafts(rates, available, n_tokens, self.cost, room, self.trust(decoding), decoding)
        self._probing, self._expected = plan.probe, plan.expected
        return plan.lengths

    def worth_drafting(self, best_rate: float, n_decoding: int, n_tokens: int) -> bool:
        """Whether a step could carry draft tokens at all: the guard allows it and the
        likeliest request's draft alone (up to max_draft tokens) would make the step's rate
        better, or probe an unmeasured size. Drafting is skipped otherwise, but for every
        SCORE_EVERY-th step, whose offers are only scored against what the model writes (so
        rates stay current for when drafts would pay)."""
        self._asked += 1
        self._probing, self._expected = False, 0.0
        if not self.guard.allows(n_decoding):
            return False
        trust = self.trust(n_decoding)
        if trust < 1.0:
            self._trust[n_decoding] = trust = trust + self.TRUST_RECOVERY * (1.0 - trust)
        chances = [trust * best_rate ** j for j in range(1, self.max_draft + 1) if best_rate ** j >= MIN_CHANCE]
        if self.model is not None:
            if self.draft_step_s > MAX_DRAFT_SHARE * self.cost.seconds(1):
                return False  # too dear to ever pay: not even asked (it would compute every prompt)
            if self.generation_limit(best_rate, n_decoding, n_tokens) > 0:
                return True
            # A scoring draft only where drafts could pay were every one kept: a draft model
            # too dear for that is never asked (nor computes the prompts to draft from).
            could_pay = self.generation_limit(1.0, n_decoding, n_tokens) > 0
            affordable = self._unused_s <= SCORE_SHARE * self._stepped_s
            return could_pay and affordable and self._asked % self._score_every_model(n_tokens) == 0
        pays = best_draft_count(chances, n_decoding, n_tokens, self.cost)[0] > 0
        return pays or self._asked % SCORE_EVERY == 0

    def _score_every_model(self, n_tokens: int) -> int:
        """How often a draft model that does not pay is asked for a scoring draft: every
        SCORE_EVERY_MODEL-th step when it is cheap, rarer as it is dearer, so scoring never
        costs more than SCORE_SHARE of the time."""
        dearness = self.draft_step_s / self.cost.seconds(max(1, n_tokens))
        return max(SCORE_EVERY_MODEL, math.ceil(dearness / SCORE_SHARE))

    def generation_limit(self, rate: float, n_decoding: int, n_tokens: int) -> int:
        """How many tokens a draft model should write for a request whose drafts are kept at
        `rate`, each costing one draft-model step before the target's step: best_draft_count
        with both models' time counted (a size to probe included)."""
        trust = self.trust(n_decoding)
        chances: list[float] = []
        chance = 1.0
        while len(chances) < self.max_draft and (chance := chance * rate) >= MIN_CHANCE:
            chances.append(chance * trust)
        return best_draft_count(chances, n_decoding, n_tokens, self.cost, self.draft_step_s)[0]

    def observe_drafting(self, steps: int, seconds: float) -> None:
        """The draft model ran `steps` draft steps in `seconds` (its decodes catching up
        with a prompt are left out: a draft token does not cost that)."""
        if steps <= 0:
            return
        if not self._draft_timed:  # the first timing replaces the prior: it may be far off
            self._draft_timed, self.draft_step_s = True, seconds / steps
        else:
            self.draft_step_s += 0.2 * (seconds / steps - self.draft_step_s)

    def observe(self, n_decoding: int, n_draft: int, generated: int, seconds: float,
                draft_seconds: float = 0.0) -> None:
        """A decode step (no prompt chunks): its decoding requests, drafts, tokens made and
        time, and the draft model's time writing its drafts (the guard judges both; the
        engine feeds the step cost the target's step alone)."""
        # The draft model's time that bought no verified draft (scoring offers, and the
        # prompts it computed to make them): kept under SCORE_SHARE of all steps' time.
        self._unused_s = self._unused_s * UNUSED_DECAY + (0.0 if n_draft else draft_seconds)
        self._stepped_s = self._stepped_s * UNUSED_DECAY + seconds + draft_seconds
        if not (n_draft and self._probing):
            self.guard.record(n_decoding, n_draft > 0, generated, seconds + draft_seconds)
        if n_draft and self._expected > 0:
            kept = max(0, generated - n_decoding)  # each decoding request makes one token anyway
            trust = self.trust(n_decoding)
            seen = min(1.0, kept / self._expected)
            weight = self.TRUST_WEIGHT * min(1.0, self._expected / self.EVIDENCE_TOKENS)
            self._trust[n_decoding] = max(self.MIN_TRUST, trust + weight * (seen - trust))
        self._probing, self._expected = False, 0.0
