"""The propose stage of a step, between scheduling and executing.

Given the scheduler's plan, it drafts for the decoding requests that may draft (prompt
lookup from a request's own tokens and the engine's pool, or the draft model), asks the
planner how many of those tokens pay in this step, and hands them to the scheduler to place
(Scheduler.place_drafts) within the room it left. After the step it learns from what the
worker kept. It keeps each running request's drafting state; Request knows nothing of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from inference.request import Request
from inference.sched.plan import Drafts, StepPlan
from inference.speculative.draft_model import DraftWant
from inference.speculative.ngram import NgramPool
from inference.speculative.planner import DraftPlanner
from inference.speculative.request_drafts import Acceptance, RequestDrafts

# A draft from the engine's pool continues a run of 12 tokens seen before exactly: a copy,
# likelier kept than a 2-4-token lookup's. The rate pool drafts start from, before the
# engine has verified any (it then follows them, engine-wide).
POOL_PRIOR_ACCEPTANCE = 0.9


def may_draft(request: Request) -> bool:
    """Whether draft tokens can be verified for it: not for a grammar (its sampler is
    llama.cpp's chain) nor for log-probabilities (one row per token is reported)."""
    return request.sampling.grammar is None and request.sampling.logprobs is None


class Proposer:
    def __init__(self, planner: DraftPlanner, max_seq_tokens: int,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.planner = planner  # the draft model, if any, is the planner's (it weighs its time)
        self.max_seq_tokens = max_seq_tokens  # a sequence's tokens and drafts fit in the KV cells
        self.clock = clock
        self.pool = NgramPool()  # every drafting request's tokens, for drafts across requests
        self.pool_acceptance = Acceptance(rate=POOL_PRIOR_ACCEPTANCE)  # of pool drafts, engine-wide
        self._requests: dict[Request, RequestDrafts] = {}

    def drafts_of(self, request: Request) -> RequestDrafts:
        state = self._requests.get(request)
        if state is None:
            state = self._requests[request] = RequestDrafts(request)
        return state

    # ----- the stage -------------------------------------------------------------------

    def propose(self, plan: StepPlan) -> Drafts:
        """Draft tokens for the plan's decode chunks where they pay (DraftPlanner), within
        the batch and the KV cells the scheduler left (plan.draft_room)."""
        decoding = [self.drafts_of(c.request) for c in plan.chunks if c.is_decode]
        if not decoding:  # a higher-priority admission may have preempted every decoding one
            return Drafts({})
        planner = self.planner
        best = max(self.rate_of(state) for state in decoding)
        if not planner.worth_drafting(best, len(decoding), plan.num_tokens):
            return Drafts({})
        room = plan.draft_room
        if room <= 0:
            return Drafts({})
        asks: list[tuple[int, int]] = []  # (chunk index, most draft tokens) per request that may draft
        for i, chunk in enumerate(plan.chunks):
            req = chunk.request
            if chunk.is_decode and may_draft(req):
                limit = min(planner.max_draft, self.max_seq_tokens - len(req.tokens) - 1, _output_left(req) - 1)
                if limit > 0:
                    asks.append((i, limit))
        seconds = 0.0
        if planner.model is not None:
            offered, seconds = self._model_offers(plan, asks, len(decoding))
        else:
            offered = [self.drafts_of(plan.chunks[i].request).draft(limit, self.pool) for i, limit in asks]
        offers = [(i, offer) for (i, _), offer in zip(asks, offered) if offer]
        if not offers:
            return Drafts({}, seconds)
        states = [self.drafts_of(plan.chunks[i].request) for i, _ in offers]
        lengths = planner.lengths([self.rate_of(s) for s in states], [len(o) for _, o in offers],
                                  plan.num_tokens, room, len(decoding))
        tokens: dict[int, tuple[int, ...]] = {}
        for (i, offer), state, k in zip(offers, states, lengths):
            if k:
                tokens[i] = tuple(offer[:k])
            else:  # scored against what the model writes there (RequestDrafts.score_shadow)
                state.shadow = (len(state.request.tokens), offer[0])
        return Drafts(tokens, seconds)

    def _model_offers(self, plan: StepPlan, asks: list[tuple[int, int]],
                      n_decoding: int) -> tuple[list[list[int]], float]:
        """The draft model's tokens for the asks, and its seconds: each request's limit cut
        to what its rate makes worth writing, one draft-model step a token
        (DraftPlanner.generation_limit)."""
        planner = self.planner
        assert planner.model is not None
        wants: list[DraftWant] = []
        for i, limit in asks:
            req = plan.chunks[i].request
            state = self.drafts_of(req)
            state.score_shadow()
            worth = planner.generation_limit(state.acceptance.rate, n_decoding, plan.num_tokens)
            assert req.seq is not None  # a decoding request holds its sequence
            wants.append(DraftWant(req.seq, req.request_id, req.tokens, min(limit, max(1, worth))))
        started = self.clock()
        offers = planner.model.propose(wants)
        seconds = self.clock() - started
        planner.observe_drafting(planner.model.last_steps, planner.model.last_step_s)
        return offers, seconds

    def rate_of(self, state: RequestDrafts) -> float:
        """A request's chance for its next draft: its own acceptance rate, or for a draft
        from the pool the pool's engine-wide rate when that is the higher (a regenerated
        reply drafts its first text from its first steps, before its own rate has risen
        from the prior)."""
        rate = state.acceptance.rate
        return max(rate, self.pool_acceptance.rate) if state.from_pool else rate

    # ----- after the step ----------------------------------------------------------------

    def verified(self, plan: StepPlan, kept_drafts: list[int] | None) -> None:
        """The worker kept kept_drafts[i] of chunk i's draft tokens: the requests' rates
        (and the pool's, for drafts from it) learn from it."""
        if not plan.n_draft:
            return
        for i, chunk in enumerate(plan.chunks):
            if chunk.draft:
                kept = kept_drafts[i] if kept_drafts is not None else 0
                state = self.drafts_of(chunk.request)
                state.acceptance.observe(len(chunk.draft), kept)
                if state.from_pool:
                    self.pool_acceptance.observe(len(chunk.draft), kept)

    def observe(self, plan: StepPlan, generated: int, seconds: float) -> None:
        """A decode step ran (no prompt chunks): what it made in how long, for the planner."""
        self.planner.observe(plan.num_decode_tokens, plan.n_draft, generated, seconds, plan.draft_s)

    def finished(self, request: Request) -> None:
        """A request left the engine: what it read and wrote goes into the pool (for later
        drafts) and its drafting state is dropped."""
        state = self._requests.pop(request, None)
        if may_draft(request):
            (state or RequestDrafts(request)).remember(self.pool)


def _output_left(req: Request) -> int:
    """Tokens the request may still generate (a large number when it has no limit)."""
    limit = req.sampling.max_tokens
    return limit - req.num_output if limit > 0 else 1 << 30
