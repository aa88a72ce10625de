"""Decides, each step, which tokens of which requests go into the next llama_decode.

Decode tokens go first (one per running sequence: latency), then prompt chunks of
admitted requests, then new admissions, all within the step's token budget. Order is
priority first (the tab the user looks at), aged by waiting time so nothing starves,
then arrival.

A negative priority is work on spare capacity (a chat's generated title): it comes after
every other request whatever its age, and gives its sequence back as soon as another
request waits and finds no room, so it never delays a tab.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from inference.kv.cache_manager import KvCacheManager
from inference.kv.prefix_tree import common_prefix_len
from inference.params import PRIORITY_VISIBLE_TAB, is_spare
from inference.request import Request, RequestStatus
from inference.sched.plan import ScheduledChunk, StepPlan
from inference.sched.step_budget import StepBudget
from inference.spec.draft_model import DraftWant
from inference.spec.policy import DraftPlanner

# A waiting request holds back for an in-flight prompt only when that saves at least this
# many tokens of prefill; a shorter shared head is cheaper to compute again.
MIN_SHARED_WAIT = 32


class Scheduler:
    def __init__(
        self,
        kv: KvCacheManager,
        budget: StepBudget,
        decode_reserve: int = 64,
        aging_s: float = 30.0,
        clock: Callable[[], float] = time.perf_counter,
        drafts: DraftPlanner | None = None,
    ) -> None:
        self.kv = kv
        self.drafts = drafts  # speculative decoding: None when it is off
        self.budget = budget
        self.decode_reserve = decode_reserve
        self.aging_s = aging_s
        self.clock = clock
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self._arrivals = 0

    # ----- bookkeeping -------------------------------------------------------------

    def add(self, request: Request) -> None:
        request.arrival_s = self.clock()
        request.arrival_index = self._arrivals
        self._arrivals += 1
        request.status = RequestStatus.WAITING
        self.waiting.append(request)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def next_waiting(self) -> Request | None:
        """The request the scheduler will admit next, if any waits."""
        return min(self.waiting, key=self._order_key(self.clock()), default=None)

    def queue_position(self, request: Request) -> int:
        order = sorted(self.waiting, key=self._order_key(self.clock()))
        return order.index(request) + 1 if request in order else 0

    def finish(self, request: Request, status: RequestStatus, keep_cache: bool = True) -> None:
        """Take a request out of the scheduler and give its sequence back."""
        request.status = status
        if self.drafts is not None and request.may_draft:
            request.remember(self.drafts.pool)  # what it read and wrote, for later drafts
        if request in self.waiting:
            self.waiting.remove(request)
        if request in self.running:
            self.running.remove(request)
        if request.seq is not None:
            if request.pin and status is RequestStatus.FINISHED_STOPPED:
                self.kv.pin(request.seq)
            else:
                self.kv.release(request.seq, keep=keep_cache)
            request.seq = None

    # ----- the step ----------------------------------------------------------------

    def schedule(self) -> StepPlan:
        now = self.clock()
        plan = StepPlan()
        plan.preempted.extend(self._yield_spare_work())
        order = self._order_key(now)
        decoding = sorted((r for r in self.running if r.is_decoding), key=order)
        while decoding and not self.kv.make_room(len(decoding)):
            if len(self.running) == 1:
                plan.out_of_cells.append(decoding.pop())
            else:
                plan.preempted.append(self._preempt_one(decoding))
        for req in decoding:
            plan.chunks.append(ScheduledChunk(req, req.num_computed, 1, True, is_decode=True))
        committed = len(decoding)
        left = self.budget.prefill_tokens(len(decoding))

        prefilling = [r for r in self.running if not r.is_decoding]
        # Cells promised but not yet used: this step's decode tokens and every admitted
        # prompt's remaining tokens (this step's chunks included).
        outstanding = len(decoding) + sum(r.num_uncomputed for r in prefilling)
        # Prompt chunks and admissions share one priority order, so a request raised while it
        # waits takes the step's budget (and, if needed, a lower prefill's sequence) first.
        queue = sorted(prefilling + self.waiting, key=order)
        blocked = False  # a waiting request found no room: those behind it do not jump ahead
        for i, req in enumerate(queue):
            if left <= 0:
                break
            if req.status is RequestStatus.WAITING:
                if blocked or req in plan.preempted or self._waits_for_inflight(req):
                    continue
                admitted, outstanding = self._admit_or_preempt(req, now, outstanding, queue[i + 1 :], plan)
                if not admitted:
                    blocked = True  # admitted prompts behind it still get their chunks
                    continue
                plan.admitted.append(req)
                n = min(req.num_uncomputed, left)
                if n > 0:  # zero when a prefill-only request is wholly cached
                    plan.chunks.append(self._prefill_chunk(req, n))
                outstanding += req.num_uncomputed + self._reserve_for(req)
            else:
                n = min(req.num_uncomputed, left)
                if not self.kv.make_room(committed + n):
                    n = self.kv.cells_free - committed
                    if n <= 0:
                        break
                plan.chunks.append(self._prefill_chunk(req, n))
            committed += n
            left -= n
        if self.drafts is not None and decoding:
            self._add_drafts(plan, committed)
        return plan

    def commit(self, plan: StepPlan, kept_drafts: list[int] | None = None) -> None:
        """The plan's tokens are now in the KV cache: those of its drafts up to the ones
        the worker kept (kept_drafts, per chunk); the rest leave the KV again."""
        for i, chunk in enumerate(plan.chunks):
            if not chunk.draft:
                self.kv.append(chunk.seq, chunk.tokens)
                chunk.request.num_computed += chunk.n_tokens
                continue
            kept = kept_drafts[i] if kept_drafts is not None else 0
            fed = chunk.tokens[: chunk.n_tokens + kept]
            self.kv.append(chunk.seq, fed)
            if kept < len(chunk.draft):
                self.kv.drop_uncommitted(chunk.seq)  # the rejected drafts' cells
            chunk.request.num_computed += len(fed)
            chunk.request.acceptance.observe(len(chunk.draft), kept)
            if self.drafts is not None and _drafts_from_pool(chunk.request):
                self.drafts.pool_acceptance.observe(len(chunk.draft), kept)

    def _add_drafts(self, plan: StepPlan, committed: int) -> None:
        """Draft tokens for the decoding requests that have some and where they pay
        (DraftPlanner), within the batch and the KV cells left after this step's others."""
        planner = self.drafts
        assert planner is not None
        decoding = [c.request for c in plan.chunks if c.is_decode]
        best = max(planner.rate_of(r.acceptance, _drafts_from_pool(r)) for r in decoding)
        if not planner.worth_drafting(best, len(decoding), plan.num_tokens):
            return
        room = min(self.budget.max_tokens - plan.num_tokens, self.kv.cells_free - committed)
        if room <= 0:
            return
        asks: list[tuple[int, int]] = []  # (chunk index, most draft tokens) per request that may draft
        for i, chunk in enumerate(plan.chunks):
            req = chunk.request
            if chunk.is_decode and req.may_draft:
                limit = min(planner.max_draft, self.kv.n_cells - len(req.tokens) - 1, _output_left(req) - 1)
                if limit > 0:
                    asks.append((i, limit))
        if planner.model is not None:
            offered = self._model_offers(plan, asks, len(decoding))
        else:
            offered = [plan.chunks[i].request.draft(limit, planner.pool) for i, limit in asks]
        at = [i for (i, _), offer in zip(asks, offered) if offer]
        offers = [offer for offer in offered if offer]
        if not offers:
            return
        rates = [planner.rate_of(req.acceptance, _drafts_from_pool(req))
                 for req in (plan.chunks[i].request for i in at)]
        lengths = planner.lengths(rates, [len(o) for o in offers], plan.num_tokens, room, len(decoding))
        for i, offer, k in zip(at, offers, lengths):
            if k:
                plan.chunks[i] = plan.chunks[i]._replace(draft=tuple(offer[:k]))
                plan.n_draft += k
            else:  # scored against what the model writes there (Request.score_shadow)
                req = plan.chunks[i].request
                req.shadow = (len(req.tokens), offer[0])

    def _model_offers(self, plan: StepPlan, asks: list[tuple[int, int]], n_decoding: int) -> list[list[int]]:
        """The draft model's tokens for the asks: each request's limit cut to what its
        rate makes worth writing, one draft-model step a token (DraftPlanner.generation_limit)."""
        planner = self.drafts
        assert planner is not None and planner.model is not None
        wants: list[DraftWant] = []
        for i, limit in asks:
            req = plan.chunks[i].request
            req.score_shadow()
            worth = planner.generation_limit(req.acceptance.rate, n_decoding, plan.num_tokens)
            assert req.seq is not None  # a decoding request holds its sequence
            wants.append(DraftWant(req.seq, req.request_id, req.tokens, min(limit, max(1, worth))))
        started = self.clock()
        offers = planner.model.propose(wants)
        plan.draft_s = self.clock() - started
        planner.observe_drafting(planner.model.last_steps, planner.model.last_step_s)
        return offers

    def make_room_after_failed_decode(self) -> Request | None:
        """llama_decode found no KV slot: evict an idle sequence, else preempt a request.

        Returns the preempted request, if one had to go back to the queue.
        """
        if self.kv.evict_one():
            return None
        if not self.running:
            return None
        return self._preempt_one(sorted(self.running, key=self._order_key(self.clock())))

    # ----- internals ---------------------------------------------------------------

    def _order_key(self, now: float) -> Callable[[Request], tuple[bool, float, int]]:
        aging = self.aging_s

        def key(req: Request) -> tuple[bool, float, int]:
            effective = req.priority + (now - req.arrival_s) / aging
            return (is_spare(req.priority), -effective, req.arrival_index)

        return key

    def _prefill_chunk(self, req: Request, n: int) -> ScheduledChunk:
        end = req.num_computed + n
        wants_logits = end == len(req.tokens) and req.wants_output
        return ScheduledChunk(req, req.num_computed, n, wants_logits)

    def _admit(self, req: Request, now: float, outstanding: int) -> bool:
        alloc = self.kv.allocate(
            req.tokens, req.reuse_limit, reserve_cells=outstanding + self._reserve_for(req)
        )
        if alloc is None:
            return False
        req.seq = alloc.seq
        req.num_computed = alloc.cached
        if req.admitted_s is None:
            req.num_cached = alloc.cached
            req.admitted_s = now
        req.status = RequestStatus.PREFILLING
        self.waiting.remove(req)
        self.running.append(req)
        return True

    def _admit_or_preempt(self, req: Request, now: float, outstanding: int, behind: list[Request],
                          plan: StepPlan) -> tuple[bool, int]:
        """Admit req; when it finds no sequence or room, send the lowest-priority request
        still prefilling behind it back to the queue (its KV stays cached, idle, so it resumes
        from there unless req's admission needs those cells) and try again.

        A prefilling request has produced no text since its admission, so nothing is lost or
        repeated. Decoding requests keep their sequence: they give it back only for room
        (make_room) or as spare work. Spare work takes nobody's sequence, not even another
        spare request's. Returns (admitted, outstanding cells after preemptions).
        """
        victims = [] if is_spare(req.priority) else [
            *self._lower_decoding(req, plan),
            *(r for r in behind if r.status is RequestStatus.PREFILLING and r in self.running)]
        if victims and not self._fits_after_preempting(req, outstanding, victims):
            victims = []  # even all of them would not make room: they keep going
        while not self._admit(req, now, outstanding):
            if not victims:
                return False, outstanding
            victim = victims.pop()  # the lowest prefilling one first, then the lowest decoding
            outstanding -= victim.num_uncomputed
            if victim.is_decoding:  # its decode token was planned: it leaves this step
                plan.chunks = [c for c in plan.chunks if c.request is not victim]
            self._requeue(victim, keep_cache=True)
            plan.preempted.append(victim)
        return True, outstanding

    def _lower_decoding(self, req: Request, plan: StepPlan) -> list[Request]:
        """For a request of the tab the user looks at: decoding requests of a lower priority
        (raw priorities: aging does not make a waiting request preempt a writing one), the
        highest first. Preempted,
        one keeps its KV as an idle prefix and its sampler, and resumes from there with no
        text lost; the tab the user looks at does not wait for a background reply to end."""
        if req.priority < PRIORITY_VISIBLE_TAB:
            return []
        lower = [c.request for c in plan.chunks if c.is_decode and c.request.priority < req.priority]
        return sorted(lower, key=self._order_key(self.clock()))

    def _fits_after_preempting(self, req: Request, outstanding: int, victims: list[Request]) -> bool:
        """Whether req could be admitted once every victim gave its sequence (and cells) back."""
        promised = outstanding - sum(v.num_uncomputed for v in victims) + self._reserve_for(req)
        released = frozenset(v.seq for v in victims if v.seq is not None)
        return self.kv.fits(req.tokens, req.reuse_limit, promised, released)

    def _reserve_for(self, req: Request) -> int:
        """Cells held back for a new request's first decode tokens, so admitting it does not
        at once force a preemption. Alone it only needs one: nobody could be preempted."""
        if not self.running:
            return 1
        limit = req.sampling.max_tokens
        return min(self.decode_reserve, limit) if limit > 0 else self.decode_reserve

    def _waits_for_inflight(self, req: Request) -> bool:
        """True while another admitted request is computing a prefix req could share: a long
        one, or the whole of req's reusable prompt (n choices of one prompt, a retry), which
        leaves req nothing of its own to compute meanwhile: waiting costs it one step."""
        limit = req.tokens[: req.reuse_limit]
        cached = self.kv.cached_prefix_len(limit)
        for other in self.running:
            if other.is_decoding:
                continue
            shared = common_prefix_len(other.tokens, limit)
            if other.num_computed >= shared:
                continue
            saved = shared - cached
            if saved >= MIN_SHARED_WAIT or (saved > 0 and shared == len(limit)):
                return True
        return False

    def _yield_spare_work(self) -> list[Request]:
        """Spare-capacity requests give their sequences back when another request waits and
        would find no sequence or no room. Their KV stays cached (idle, evictable), so they
        resume cheaply once the others leave room."""
        spare = [r for r in self.running if is_spare(r.priority)]
        if not spare:
            return []
        wanting = sorted((r for r in self.waiting if not is_spare(r.priority) and not self._waits_for_inflight(r)),
                         key=self._order_key(self.clock()))
        if not wanting:
            return []
        stats = self.kv.stats()
        open_seqs = stats.seqs_total - stats.seqs_active - stats.seqs_pinned  # free or idle
        head = wanting[0]
        promised = sum(r.num_uncomputed for r in self.running)
        if len(wanting) <= open_seqs and self.kv.fits(head.tokens, head.reuse_limit,
                                                      promised + self._reserve_for(head)):
            return []
        for req in spare:
            self._requeue(req, keep_cache=True)
        return spare

    def set_priority(self, request: Request, priority: int) -> None:
        """A request's priority changes while it waits or runs (the user switched tabs): the
        waiting queue is ordered at each step, and preemption reads the running one's."""
        request.priority = priority

    def _preempt_one(self, candidates: list[Request]) -> Request:
        """Send the last request in priority order back to the queue, dropping its KV."""
        victim = candidates.pop()
        self._requeue(victim, keep_cache=False)
        return victim

    def _requeue(self, req: Request, keep_cache: bool) -> None:
        """A running request back to the queue; it computes its tokens again when readmitted
        (from the cache, for those still there)."""
        self.running.remove(req)
        if req.seq is not None:  # every running request holds one
            self.kv.release(req.seq, keep=keep_cache)
        req.seq = None
        req.num_computed = 0
        req.status = RequestStatus.WAITING
        req.preemptions += 1
        self.waiting.append(req)


def _drafts_from_pool(req: Request) -> bool:
    return req.drafter is not None and req.drafter.from_pool


def _output_left(req: Request) -> int:
    """Tokens the request may still generate (a large number when it has no limit)."""
    limit = req.sampling.max_tokens
    return limit - req.num_output if limit > 0 else 1 << 30
