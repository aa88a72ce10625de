"""Decides, each step, which tokens of which requests go into the next llama_decode.

Decode tokens go first (one per running sequence: latency), then prompt chunks of
admitted requests, then new admissions, all within the step's token budget. Order is
priority first (the tab the user looks at), aged by waiting time so nothing starves,
then arrival.

A negative priority is work on spare capacity (a chat's generated title, a background
job's items): it comes after every other request whatever its age, and gives its sequence
back as soon as another request waits and finds no room, so it never delays a tab. While a
request of the tab the user looks at (PRIORITY_VISIBLE_TAB and above) waits or runs, spare
work steps aside altogether (its KV kept cached) and resumes when that request ends: rows of
spare work beside it would slow each of its steps (issue 37: a chat typed while a job runs).

Draft tokens are the propose stage's (inference/speculative/): a plan with decoding requests
says how many more tokens the step could carry (draft_room), and place_drafts puts the drafts
it is then given after their requests' decode tokens; commit keeps the KV of those kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from inference.kv.cache_manager import KvCacheManager
from inference.kv.prefix_tree import common_prefix_len
from inference.params import PRIORITY_VISIBLE_TAB, image_slot_row, is_spare
from inference.request import Request, RequestStatus
from inference.sched.plan import Drafts, ScheduledChunk, StepPlan
from inference.sched.step_budget import StepBudget

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
    ) -> None:
        self.kv = kv
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
        if request in self.waiting:
            self.waiting.remove(request)
        if request in self.running:
            self.running.remove(request)
        if request.seq is not None:
            if request.pin and status is RequestStatus.FINISHED_STOPPED:
                self.kv.pin(request.seq)
            else:
                self.kv.release(request.seq, keep=keep_cache, priority=request.priority)
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
        focused = self._focused()
        for i, req in enumerate(queue):
            if left <= 0:
                break
            if req.status is RequestStatus.WAITING:
                if blocked or req in plan.preempted or (focused and is_spare(req.priority)) \
                        or self._waits_for_inflight(req):
                    continue
                admitted, outstanding = self._admit_or_preempt(req, now, outstanding, queue[i + 1 :], plan)
                if not admitted:
                    blocked = True  # admitted prompts behind it still get their chunks
                    continue
                plan.admitted.append(req)
                n = min(req.num_uncomputed, left)
                if n > 0:  # zero when a prefill-only request is wholly cached
                    n = self._prefill_len(req, n)
                    plan.chunks.append(self._prefill_chunk(req, n))
                outstanding += req.num_uncomputed + self._reserve_for(req)
            else:
                n = self._prefill_len(req, min(req.num_uncomputed, left))
                if not self.kv.make_room(committed + n):
                    room = self.kv.cells_free - committed
                    n = self._prefill_len(req, room) if room > 0 else 0
                    if n <= 0 or n > room:  # no room, or not for a whole bidirectional piece
                        break
                plan.chunks.append(self._prefill_chunk(req, n))
            more = self._next_runs(req, req.num_computed + n, left - n, committed + n) if n > 0 else []
            plan.chunks += more
            n += sum(c.n_tokens for c in more)
            committed += n
            left -= n
        if decoding:  # what the propose stage may fill with draft tokens
            plan.draft_room = min(self.budget.max_tokens - plan.num_tokens, self.kv.cells_free - committed)
        return plan

    def place_drafts(self, plan: StepPlan, drafts: Drafts) -> None:
        """The propose stage's draft tokens into their decode chunks, within the room the
        plan left (plan.draft_room); the worker verifies them after the chunk's token."""
        plan.draft_s = drafts.seconds
        room = plan.draft_room
        for i, draft in drafts.tokens.items():
            chunk = plan.chunks[i]
            draft = draft[:room]
            if not draft or not chunk.is_decode:
                continue
            if min(draft) < 0:  # looked up in a prompt with an image: its ids are no tokens
                draft = draft[: next(j for j, t in enumerate(draft) if t < 0)]
                if not draft:
                    continue
            plan.chunks[i] = chunk._replace(draft=draft)
            plan.n_draft += len(draft)
            room -= len(draft)

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

    def _prefill_len(self, req: Request, n: int, start: int | None = None) -> int:
        """How many prompt tokens from start (the request's next) go in one chunk, given n:
        fewer where a run of text or of one image's rows ends (llama.cpp decodes embeddings
        apart from tokens); more where n would split an image piece that must go whole
        (Gemma 3's rows attend to each other both ways; Qwen-VL's share one position, which
        the cache cannot cut between), which then takes the step over its budget, as
        libmtmd's own helper decodes such an image at once."""
        start = req.num_computed if start is None else start
        first = req.tokens[start]
        if not req.images or first >= 0:
            return _same_kind_run(req.tokens, start, n) if req.images else n
        run = _same_kind_run(req.tokens, start, len(req.tokens) - start)  # at most the image's rows
        image = req.images.get(image_slot_row(first)[0])
        return run if image is not None and image.whole else min(run, n)

    def _prefill_chunk(self, req: Request, n: int, start: int | None = None) -> ScheduledChunk:
        """n prompt tokens from start (the request's next; n from _prefill_len)."""
        start = req.num_computed if start is None else start
        wants_logits = start + n == len(req.tokens) and req.wants_output
        return ScheduledChunk(req, start, n, wants_logits)

    def _next_runs(self, req: Request, start: int, left: int, committed: int) -> list[ScheduledChunk]:
        """A prompt with images goes on in the same step after its first chunk: each further
        run of text or of an image's piece its own chunk, in order (the worker decodes a
        request's chunks one after the other), while the step's budget and the cache's room
        hold whole runs, so a tiled image (SmolVLM: 17 pieces with text between them) is not
        one step a run and the question after an image waits for no further step."""
        chunks: list[ScheduledChunk] = []
        while req.images and left > 0 and start < len(req.tokens):
            n = self._prefill_len(req, min(left, len(req.tokens) - start), start)
            if n > left or not self.kv.make_room(committed + n):
                break  # a whole piece past what is left waits for a step of its own
            chunks.append(self._prefill_chunk(req, n, start))
            start, left, committed = start + n, left - n, committed + n
        return chunks

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
        """Spare-capacity requests give their sequences back when a request of the visible
        tab waits or runs, or when another request waits and would find no sequence or room.
        Their KV stays cached (idle, evictable), so they resume cheaply once the others leave
        room."""
        spare = [r for r in self.running if is_spare(r.priority)]
        if not spare:
            return []
        if self._focused():
            for req in spare:
                self._requeue(req, keep_cache=True)
            return spare
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

    def _focused(self) -> bool:
        """A request of the tab the user looks at waits or runs (raw priority: aging never
        makes another request one)."""
        return any(r.priority >= PRIORITY_VISIBLE_TAB for r in self.running) or \
            any(r.priority >= PRIORITY_VISIBLE_TAB for r in self.waiting)

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
            self.kv.release(req.seq, keep=keep_cache, priority=req.priority)
        req.seq = None
        req.num_computed = 0
        req.status = RequestStatus.WAITING
        req.preemptions += 1
        self.waiting.append(req)



def _same_kind_run(tokens: list[int], start: int, n: int) -> int:
    """How many of tokens[start:start + n] are of tokens[start]'s kind: text, or the rows
    of one image (negative ids, consecutive)."""
    first = tokens[start]
    if first >= 0:
        for i in range(start + 1, start + n):
            if tokens[i] < 0:
                return i - start
        return n
    for i in range(start + 1, start + n):
        if tokens[i] != tokens[i - 1] - 1:
            return i - start
    return n
