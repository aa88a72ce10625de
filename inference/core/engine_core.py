"""The synchronous heart of the engine: schedule -> propose -> execute -> postprocess.

The scheduler plans a step, the proposer adds draft tokens where they pay (speculative
decoding, when it is on), the model runner decodes and samples (model_runner.py is all
EngineCore knows of it), and the results become deltas. Owned by exactly one thread (see
engine.py). Errors end the requests they concern and never escape step().
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from inference.core.lanes import LaneMeter
from inference.core.metrics import EngineMetrics, MetricsSnapshot
from inference.core.output_processor import RequestOutput
from inference.errors import RequestError
from inference.kv.cache_manager import KvCacheManager
from inference.kv.disk_cache import DiskPromptCache, SeqStateBackend
from inference.kv.disk_store import KvDiskStore
from inference.outputs import Delta, FinishReason, Phase, TokenLogprob, TopLogprob
from inference.params import ChatRequest, LoadSettings, new_request_id
from inference.request import Request, RequestStatus
from inference.sample.logprobs import SampledLogprobs
from inference.sched.plan import StepPlan
from inference.sched.scheduler import Scheduler
from inference.sched.step_budget import StepBudget
from inference.sched.step_cost import StepCost
from inference.speculative.planner import DraftPlanner
from inference.speculative.proposer import Proposer
from inference.tokenizer.input_processor import InputProcessor
from inference.worker.model_runner import ModelRunner, StepOutput

log = logging.getLogger(__name__)

_STATUS_OF = {
    FinishReason.STOP: RequestStatus.FINISHED_STOPPED,
    FinishReason.LENGTH: RequestStatus.FINISHED_LENGTH,
    FinishReason.CONTEXT_FULL: RequestStatus.FINISHED_LENGTH,
    FinishReason.CANCELLED: RequestStatus.FINISHED_CANCELLED,
    FinishReason.ERROR: RequestStatus.FINISHED_ERROR,
    FinishReason.INTERRUPTED: RequestStatus.FINISHED_CANCELLED,
}

# How many times one step may free room and retry after llama_decode found no KV slot.
MAX_DECODE_RETRIES = 8


class EngineCore:
    def __init__(
        self, runner: ModelRunner, settings: LoadSettings, clock: Callable[[], float] = time.perf_counter,
        store: KvDiskStore | None = None, wake: Callable[[], None] | None = None,
    ) -> None:
        self.runner = runner
        self.settings = settings
        self.clock = clock  # every time stamp and step duration: tests run on a fake one
        # The vision projector, when the runner loaded one (LlamaRunner.images): images in
        # prompts are encoded by it, on whichever thread prepares them.
        self.images = getattr(runner, "images", None)
        # Cut at positions, not indices, where M-RoPE images span fewer than their rows.
        mrope = self.images is not None and self.images.mrope
        self.kv = KvCacheManager(runner.n_ctx, settings.n_seq_max, backend=runner,
                                 position_of=getattr(runner, "position_of", None) if mrope else None)
        # What a step costs, learned from every step: the budget bounds prompt steps by it,
        # the draft planner weighs drafts by it.
        self.cost = StepCost()
        self.budget = StepBudget(settings.n_batch, settings.target_itl_s, max_step_s=settings.max_step_s,
                                 cost=self.cost)
        self.scheduler = Scheduler(self.kv, self.budget, settings.decode_reserve, clock=clock)
        self.proposer: Proposer | None = None  # speculative decoding, when it is on
        if settings.speculative != "off":
            planner = DraftPlanner(settings.draft_max, self.cost, model=runner.draft_model)
            self.proposer = Proposer(planner, self.kv.n_cells, clock=clock)
        self.metrics = EngineMetrics()
        self.lanes = LaneMeter()  # the metrics' per-owner figures, taken per snapshot
        # The one input processor of this model: the engine thread's requests and the other
        # threads' (Engine.prepare) are rendered, tokenized and checked by the same object.
        self.inputs = InputProcessor.for_vocab(runner, runner.n_ctx, settings.chat_template, self.images)
        self._outputs: dict[str, RequestOutput] = {}
        # The disk prompt cache; store given: runner is a SeqStateBackend too (LlamaRunner).
        self.disk: DiskPromptCache | None = None
        if store is not None:
            backend: SeqStateBackend = runner  # type: ignore[assignment]
            self.disk = DiskPromptCache(store, self.kv, backend, notify=wake,
                                        keep_images=self.images is not None and self.images.persistent)

    # ----- commands ----------------------------------------------------------------

    def has_work(self) -> bool:
        return self.scheduler.has_work()

    def add_request(self, chat: ChatRequest) -> list[Delta]:
        request_id = chat.request_id or new_request_id()
        try:
            prepared = self.inputs.prepare(chat)
            tokens = list(prepared.prompt_tokens or ())
            if chat.pin and self.kv.pinned_seq_for(tokens) is not None:
                return [Delta.finished_with(request_id, FinishReason.STOP)]
            req = Request(request_id, tokens, chat.sampling, priority=chat.priority, pin=chat.pin,
                          images={image.slot: image for image in prepared.images}, owner=chat.owner)
            if req.wants_output:
                self.runner.start_sampling(request_id, chat.sampling, tokens)  # a bad grammar raises
        except RequestError as exc:
            return [Delta.finished_with(request_id, FinishReason.ERROR, str(exc))]
        self._outputs[request_id] = RequestOutput(req, n_ctx=self.runner.n_ctx, submitted_s=self.clock(),
                                                  dropped=prepared.dropped)
        if self.disk is not None and self.disk.begin_restore(req):
            # it joins the queue once its prefix is loaded (poll_restores): not "queued" meanwhile
            return [Delta(request_id, phase=Phase.RESTORING, progress=(0, len(tokens)))]
        self.scheduler.add(req)
        # its place in the scheduler's order (priority first), not the queue's length
        return [Delta(request_id, phase=Phase.QUEUED, progress=(self.scheduler.queue_position(req), len(tokens)))]

    def poll_restores(self) -> None:
        """Requests whose saved prefix was read from disk: load it, then schedule them
        (a cancelled one is dropped). Between steps, on the engine thread."""
        if self.disk is None or not self.disk.restoring:
            return
        promised = sum(r.num_uncomputed for r in self.scheduler.running) + len(self.scheduler.running)
        for req in self.disk.poll(promised):
            if req.request_id in self._outputs and not req.status.finished:
                self.scheduler.add(req)

    def save_pending(self, limit: int | None = None) -> None:
        """Hand the sequences that finished to the disk cache (after the step's deltas):
        all of them, or the first `limit`."""
        if self.disk is not None:
            self.disk.save_pending(limit)

    @property
    def saves_pending(self) -> bool:
        return self.disk is not None and self.disk.saves_pending
    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()

    def cancel(self, request_id: str) -> list[Delta]:
        out = self._outputs.get(request_id)
        if out is None:
            return []
        return [self._finish(out, FinishReason.CANCELLED, out.flush())]

    def set_priority(self, request_id: str, priority: int) -> bool:
        """Change a waiting or running request's priority (the user switched tabs). False
        when the engine no longer knows the request (finished, or never sent)."""
        out = self._outputs.get(request_id)
        if out is None:
            return False
        self.scheduler.set_priority(out.request, priority)
        return True

    def cancel_all(self, reason: FinishReason = FinishReason.CANCELLED, error: str | None = None) -> list[Delta]:
        return [self._finish(out, reason, "", error) for out in list(self._outputs.values())]

    def unpin(self, tokens: list[int]) -> bool:
        seq = self.kv.pinned_seq_for(tokens)
        if seq is None:
            return False
        self.kv.unpin(seq)
        return True

    # ----- the step ----------------------------------------------------------------

    def step(self) -> list[Delta]:
        step_started = self.clock()
        plan, deltas = self._schedule()
        if plan.empty:
            return deltas or self._fail_unschedulable()
        self._propose(plan)
        started = self.clock()
        plan, output, retried = self._execute(plan)
        duration = self.clock() - started
        deltas += retried
        if plan.empty:  # making room after a failed decode left nothing to run
            return deltas
        deltas += self._postprocess(plan, output, duration)
        deltas += self._read_for_waiting(plan)
        if output.ok and plan.num_prefill_tokens == 0:
            # Host time: the whole step (planning, batch filling, sampling, deltas) less
            # the model's own llama_decode; what a GPU's few-ms decode would expose.
            self.metrics.record_host(self.clock() - step_started, output.decode_s, output.sample_s)
        return deltas

    def _schedule(self) -> tuple[StepPlan, list[Delta]]:
        """Plan the step; report requests it sent back to the queue or ended before running."""
        plan = self.scheduler.schedule()
        self._record_admissions(plan)
        deltas = self._requeued(plan.preempted)
        deltas += self._finish_out_of_cells(plan)
        deltas += self._finish_fully_cached(plan)
        return plan, deltas

    def _propose(self, plan: StepPlan) -> None:
        """Speculative decoding: draft tokens for the plan's decoding requests, placed by the
        scheduler in the room it left."""
        if self.proposer is not None:
            self.scheduler.place_drafts(plan, self.proposer.propose(plan))

    def _execute(self, plan: StepPlan) -> tuple[StepPlan, StepOutput, list[Delta]]:
        """Run the plan. When llama_decode finds no KV slot (our cell count and llama.cpp's
        disagree, e.g. fragmentation), free room, plan again and retry a few times."""
        deltas: list[Delta] = []
        output = self.runner.execute(plan)
        for _ in range(MAX_DECODE_RETRIES):
            if not output.no_kv_slot:
                break
            preempted = self.scheduler.make_room_after_failed_decode()
            deltas += self._requeued([preempted] if preempted else [])
            plan, replanned = self._schedule()
            deltas += replanned
            if plan.empty:
                break
            self._propose(plan)
            output = self.runner.execute(plan)
        return plan, output, deltas

    def _postprocess(self, plan: StepPlan, output: StepOutput, duration: float) -> list[Delta]:
        """The plan's tokens are in the KV cache: account them and turn samples into deltas."""
        if not output.ok:
            return self._fail_plan(plan, f"llama_decode failed with code {output.code}")
        self.scheduler.commit(plan, output.kept_drafts)
        if self.proposer is not None:
            self.proposer.verified(plan, output.kept_drafts)
        for i in output.steered or ():
            out = self._outputs.get(plan.chunks[i].request.request_id)
            if out is not None:
                out.steered = True
        deltas, sampled = self._emit(plan, output.tokens, output.logprobs, output.kept_drafts)
        if output.errors:
            deltas += self._fail_grammars(plan, output.errors)
        kept = 0
        if output.kept_drafts is not None:
            kept = sum(output.kept_drafts)
            self.metrics.record_drafts(plan.n_draft, kept)
        self._record(plan, duration, sampled, kept)
        return deltas

    def _fail_grammars(self, plan: StepPlan, errors: dict[int, str]) -> list[Delta]:
        """Requests whose grammar failed mid-reply (a step over its limits) end with the error,
        the text so far kept."""
        deltas = []
        for i, message in errors.items():
            out = self._outputs.get(plan.chunks[i].request.request_id)
            if out is not None:
                deltas.append(self._finish(out, FinishReason.ERROR, out.flush(), message))
        return deltas

    def _finish_out_of_cells(self, plan: StepPlan) -> list[Delta]:
        outs = [self._outputs[r.request_id] for r in plan.out_of_cells]
        return [self._finish(out, FinishReason.CONTEXT_FULL, out.flush()) for out in outs]

    def _finish_fully_cached(self, plan: StepPlan) -> list[Delta]:
        """A prefill-only request (pinning) whose prompt was wholly in the cache is done."""
        done = [r for r in plan.admitted if not r.wants_output and r.num_uncomputed == 0]
        return [self._finish(self._outputs[r.request_id], FinishReason.STOP, "") for r in done]

    def _emit(self, plan: StepPlan, tokens: list[int | None], logprobs: list[SampledLogprobs | None],
              kept_drafts: list[int] | None = None) -> tuple[list[Delta], int]:
        deltas: list[Delta] = []
        itls: list[float] = []
        sampled = 0
        now = self.clock()  # every token of a step arrives at the same moment
        outputs = self._outputs
        chunks = plan.chunks
        for i, (chunk, token) in enumerate(zip(chunks, tokens)):
            out = outputs.get(chunk.request.request_id)
            if out is None:
                continue
            if token is None:
                if i + 1 < len(chunks) and chunks[i + 1].request is chunk.request:
                    continue  # a prompt's run before more of it in this step: one delta, at its last
                deltas.append(self._progress_or_done(out))
                continue
            if kept_drafts is not None and chunk.draft:
                emitted = [*chunk.draft[: kept_drafts[i]], token]
                sampled += len(emitted)
                deltas.append(self._on_tokens(out, emitted, now, itls))
                continue
            sampled += 1
            deltas.append(self._on_token(out, token, now, logprobs[i] if i < len(logprobs) else None, itls))
        self.metrics.record_itls(itls)
        return deltas, sampled

    def _on_token(self, out: RequestOutput, token: int, now: float, sampled: SampledLogprobs | None,
                  itls: list[float]) -> Delta:
        runner = self.runner
        verdict = out.on_token(token, runner.piece(token), runner.is_eog(token), now)
        if verdict.first:
            self.metrics.record_ttft(verdict.latency_s)
        else:
            itls.append(verdict.latency_s)  # recorded for the whole step at once
        logprobs = (self._token_logprob(token, sampled),) if sampled is not None and verdict.kept else ()
        if verdict.finish is not None:
            kept = (token,) if verdict.kept else ()
            return self._finish(out, verdict.finish, verdict.text, token_ids=kept, logprobs=logprobs)
        return Delta(out.request_id, verdict.text, (token,), Phase.DECODING, None, None, None, None, logprobs)

    def _on_tokens(self, out: RequestOutput, emitted: list[int], now: float, itls: list[float]) -> Delta:
        """Several tokens of one request at once (kept draft tokens and the one sampled
        after them): one delta, ended at the first token that ends the request."""
        texts: list[str] = []
        kept: list[int] = []
        runner = self.runner
        for token in emitted:
            verdict = out.on_token(token, runner.piece(token), runner.is_eog(token), now)
            if verdict.first:
                self.metrics.record_ttft(verdict.latency_s)
            else:
                itls.append(verdict.latency_s)
            texts.append(verdict.text)
            if verdict.kept:
                kept.append(token)
            if verdict.finish is not None:
                return self._finish(out, verdict.finish, "".join(texts), token_ids=tuple(kept))
        return Delta(out.request_id, "".join(texts), tuple(kept), Phase.DECODING)

    def _token_logprob(self, token: int, sampled: SampledLogprobs) -> TokenLogprob:
        def text(t: int) -> tuple[str, bytes]:
            piece = self.runner.piece(t)
            return piece.decode("utf-8", "replace"), piece

        top = tuple(TopLogprob(*text(t), lp) for t, lp in sampled.top)
        return TokenLogprob(*text(token), sampled.logprob, top)

    def _progress_or_done(self, out: RequestOutput) -> Delta:
        req = out.request
        if not req.wants_output and req.num_uncomputed == 0:
            return self._finish(out, FinishReason.STOP, "")
        return Delta(out.request_id, phase=Phase.PREFILLING, progress=(req.num_computed, len(req.tokens)))

    def _read_for_waiting(self, plan: StepPlan) -> list[Delta]:
        """A chat whose prompt begins with a prefix being pinned (its attached documents)
        waits while that prefix is computed: the engine is reading its prompt, not queueing
        it, so it hears the pin's progress (issue 39: 17 s of "queued" before "890 cached")."""
        pins = [c.request for c in plan.chunks if c.request.pin and not c.is_decode]
        if not pins or not self.scheduler.waiting:
            return []
        deltas = []
        for waiting in self.scheduler.waiting:
            for pin in pins:
                n = len(pin.tokens)
                if len(waiting.tokens) > n and waiting.tokens[:n] == pin.tokens[:n]:
                    deltas.append(Delta(waiting.request_id, phase=Phase.PREFILLING,
                                        progress=(pin.num_computed, len(waiting.tokens))))
                    break
        return deltas

    def _record_admissions(self, plan: StepPlan) -> None:
        for req in plan.admitted:
            if req.preemptions == 0:
                self.metrics.record_admission(req.num_prompt, req.num_cached)

    def _requeued(self, requests: list[Request]) -> list[Delta]:
        self.metrics.preemptions += len(requests)
        return [
            Delta(r.request_id, phase=Phase.QUEUED, progress=(self.scheduler.queue_position(r), len(r.tokens)))
            for r in requests
        ]

    def _fail_unschedulable(self) -> list[Delta]:
        """Nothing runs, yet the head of the queue cannot be admitted: it never will be."""
        head = self.scheduler.next_waiting()
        if self.scheduler.running or head is None:
            return []
        out = self._outputs[head.request_id]
        stats = self.kv.stats()
        msg = (
            f"the KV cache cannot hold this request: it needs about {len(head.tokens)} cells "
            f"and {stats.cells_used} of {stats.cells_total} are pinned; unpin a system prompt "
            "or load the model with a larger context"
        )
        return [self._finish(out, FinishReason.ERROR, "", msg)]

    def _fail_plan(self, plan: StepPlan, message: str) -> list[Delta]:
        log.error("%s; failing %d request(s)", message, len(plan.chunks))
        deltas = []
        for request in {id(chunk.request): chunk.request for chunk in plan.chunks}.values():
            out = self._outputs.get(request.request_id)
            if out is not None:
                deltas.append(self._finish(out, FinishReason.ERROR, "", message, keep_cache=False))
        return deltas

    def _finish(
        self,
        out: RequestOutput,
        reason: FinishReason,
        text: str,
        error: str | None = None,
        keep_cache: bool = True,
        token_ids: tuple[int, ...] = (),
        logprobs: tuple[TokenLogprob, ...] = (),
    ) -> Delta:
        req = out.request
        seq = req.seq
        self.scheduler.finish(req, _STATUS_OF[reason], keep_cache=keep_cache)
        if self.proposer is not None:
            self.proposer.finished(req)
        if self.disk is not None and seq is not None and keep_cache and reason is not FinishReason.ERROR:
            self.disk.on_finished(seq, pinned=req.pin)
        self._outputs.pop(req.request_id, None)
        self.runner.stop_sampling(req.request_id)
        self.lanes.finished(req.owner, req.num_output)
        if reason is FinishReason.ERROR:
            self.metrics.requests_failed += 1
        else:
            self.metrics.requests_finished += 1
        return out.finished_delta(text, reason, self.clock(), error, token_ids, logprobs)

    def _record(self, plan: StepPlan, duration: float, sampled: int, kept_drafts: int = 0) -> None:
        """A step ran: duration is the target model's; the draft model's (plan.draft_s) is the
        step's too, for the metrics, the budget and the draft planner's guard."""
        n_tokens = plan.num_tokens
        n_decoding = plan.num_decode_tokens
        n_prefill = n_tokens - n_decoding - plan.n_draft
        self.cost.observe(n_tokens, duration, prompt=n_prefill > 0)  # the target's step alone
        step_s = duration + plan.draft_s
        n_decode = n_decoding + kept_drafts  # a kept draft token is a decoded one
        n_seqs = len({id(chunk.request) for chunk in plan.chunks})  # a prompt may have several chunks
        self.metrics.record_step(step_s, n_prefill, n_decode, n_seqs, sampled)
        self.metrics.record_kv(self.kv.cells_used)
        queued = len(self.scheduler.waiting) + sum(1 for r in self.scheduler.running if not r.is_decoding)
        self.budget.observe(step_s, n_decode, n_prefill, queued)
        if self.proposer is not None and n_prefill == 0:
            self.proposer.observe(plan, sampled, duration)

    # ----- observation -------------------------------------------------------------

    def snapshot(self) -> MetricsSnapshot:
        snap = self.metrics.snapshot(
            queued=len(self.scheduler.waiting),
            running=len(self.scheduler.running),
            kv=self.kv.stats(),
            lanes=self.lanes.lanes(self.clock(), self.scheduler.running, self.scheduler.waiting, self.kv.seq_len),
        )
        if self.images is not None:
            snap = replace(snap, images_encoded=self.images.images_encoded, image_encode_s=self.images.encode_s,
                           images_loaded=self.images.images_loaded)
        if self.disk is None:
            return snap
        c = self.disk.counters
        return replace(snap, prompt_tokens_restored=c.restored_tokens, kv_restores=c.restores,
                       kv_restore_failures=c.restore_failures, kv_disk_saves=c.saves)
