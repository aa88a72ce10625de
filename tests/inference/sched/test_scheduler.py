"""The scheduler's decisions, made inside the real EngineCore on the fake runner.

Every step goes through EngineCore.step(): schedule, execute on the fake runner (which
writes the reference KV cache and asserts it never overflows), commit, postprocess. The
driver records each plan the scheduler made and checks the cache after every step. Every
sampled token is SAMPLED; each step takes 1 s of fake time.
"""

from __future__ import annotations

import pytest

from inference.kv.cache_manager import SeqState
from inference.outputs import FinishReason, Phase
from inference.params import SamplingParams
from inference.request import RequestStatus
from inference.sched.scheduler import MIN_SHARED_WAIT
from tests.support.core_driver import SAMPLED, chunk_of, make_sim, prompt

# ----- basics ------------------------------------------------------------------------------


def test_empty_core_plans_nothing_and_runs_nothing() -> None:
    sim = make_sim()
    assert not sim.core.has_work()
    assert sim.core.step() == []
    [plan] = sim.plans
    assert plan.empty and plan.num_tokens == 0
    assert sim.runner.executed == []


def test_short_prompt_is_prefilled_in_one_step_then_decoded() -> None:
    sim = make_sim()
    req = sim.add("a", prompt(1, 10), max_tokens=3)
    assert req.status is RequestStatus.WAITING and sim.core.has_work()
    plan = sim.step()
    assert plan.admitted == [req]
    [chunk] = plan.chunks
    assert (chunk.start, chunk.n_tokens, chunk.wants_logits, chunk.is_decode) == (0, 10, True, False)
    assert chunk.tokens == prompt(1, 10)
    assert req.num_computed == 10 and req.status is RequestStatus.DECODING
    plan = sim.step()
    [chunk] = plan.chunks
    assert (chunk.start, chunk.n_tokens, chunk.is_decode, chunk.tokens) == (10, 1, True, [SAMPLED])
    assert plan.num_decode_tokens == 1 and plan.num_prefill_tokens == 0
    sim.step()
    assert req.status is RequestStatus.FINISHED_LENGTH
    assert sim.final("a").finish_reason is FinishReason.LENGTH
    assert req.output_tokens == [SAMPLED] * 3
    assert not sim.core.has_work()
    # its KV stays cached: prompt + the two outputs that were fed back
    assert sim.kv.stats().seqs_idle == 1 and sim.kv.cells_used == 12


def test_decode_tokens_come_first_then_prefill() -> None:
    sim = make_sim()
    a = sim.add("a", prompt(1, 5), max_tokens=50)
    b = sim.add("b", prompt(2, 5), max_tokens=50)
    sim.step()
    c = sim.add("c", prompt(3, 40), max_tokens=50)
    plan = sim.step()
    assert [ch.request for ch in plan.chunks] == [a, b, c]
    assert [ch.is_decode for ch in plan.chunks] == [True, True, False]
    assert plan.num_decode_tokens == 2
    assert plan.num_prefill_tokens == 16  # the budget's prefill share while others decode


def test_chunked_prefill_is_bounded_by_the_budget() -> None:
    sim = make_sim(n_batch=64)
    req = sim.add("long", prompt(1, 150))
    plans = [sim.step() for _ in range(3)]
    # nobody decodes: each step takes the whole batch
    assert [p.num_tokens for p in plans] == [64, 64, 22]
    assert [c.start for p in plans for c in p.chunks] == [0, 64, 128]
    assert [c.wants_logits for p in plans for c in p.chunks] == [False, False, True]
    assert req.num_computed == 150 and req.num_output == 1
    assert [d.phase for d in sim.of("long")] == [Phase.QUEUED, Phase.PREFILLING, Phase.PREFILLING, Phase.DECODING]


def test_long_prompt_is_split_over_steps_while_others_keep_decoding() -> None:
    sim = make_sim(n_batch=64)
    d = sim.add("d", prompt(1, 4), max_tokens=100)
    sim.step()
    long = sim.add("long", prompt(2, 100))
    steps = 0
    while long.num_output == 0:
        plan = sim.step()
        steps += 1
        assert plan.chunks[0].request is d and plan.chunks[0].is_decode
        assert plan.num_prefill_tokens <= sim.sched.budget.prefill_tokens(1)
        assert plan.num_tokens <= 64
    assert steps == 7  # ceil(100 / 16): slow steps keep the prefill share at its floor
    assert d.num_output == 1 + steps


def test_commit_updates_num_computed_and_the_kv_tree_after_the_model_ran() -> None:
    sim = make_sim(n_batch=64)
    req = sim.add("a", prompt(1, 100))
    seen = []

    def look(plan) -> None:  # mid-step: planned, not yet committed
        seen.append((req.num_computed, sim.kv.seq_len(req.seq), sim.kv.cells_used, plan.num_tokens))

    sim.runner.on_execute = look
    sim.step()
    assert seen == [(0, 0, 0, 64)]
    assert req.num_computed == 64
    assert sim.kv.seq_tokens(req.seq) == prompt(1, 64)
    assert sim.kv.cells_used == 64


# ----- order ------------------------------------------------------------------------------


def test_higher_priority_is_admitted_first_then_arrival_order() -> None:
    sim = make_sim(n_seqs=8, n_batch=20)
    low = sim.add("low", prompt(1, 10), priority=0)
    high = sim.add("high", prompt(2, 10), priority=5)
    mid1 = sim.add("mid1", prompt(3, 10), priority=1)
    mid2 = sim.add("mid2", prompt(4, 10), priority=1)
    plan = sim.step()
    assert plan.admitted == [high, mid1]  # 20 prefill tokens fit, in priority order
    assert chunk_of(plan, mid1).n_tokens == 10
    assert sim.sched.queue_position(mid2) == 1
    assert sim.sched.queue_position(low) == 2
    assert sim.sched.queue_position(high) == 0  # not waiting


def test_aging_lets_an_old_low_priority_request_pass_a_newer_high_one() -> None:
    sim = make_sim(aging_s=10.0)
    low = sim.add("low", prompt(1, 5), priority=0)
    sim.clock.now = 5.0
    early_high = sim.add("early", prompt(2, 5), priority=1)
    sim.clock.now = 15.0
    late_high = sim.add("late", prompt(3, 5), priority=1)
    sim.clock.now = 20.0
    # low: 0 + 20/10 = 2.0; early: 1 + 15/10 = 2.5; late: 1 + 5/10 = 1.5
    assert [sim.sched.queue_position(r) for r in (early_high, low, late_high)] == [1, 2, 3]
    plan = sim.step()
    assert plan.admitted == [early_high, low, late_high]  # all fit; admitted in that order


def test_nothing_starves_under_a_stream_of_higher_priority_requests() -> None:
    sim = make_sim(n_seqs=1, aging_s=10.0)
    low = sim.add("low", prompt(1, 5), max_tokens=1, priority=0)
    for i in range(80):
        sim.add(f"high{i}", prompt(100 + i, 5), max_tokens=1, priority=3)
        plan = sim.step()
        if low in plan.admitted:
            break
    assert low.admitted_s is not None, "low-priority request starved"
    # it goes ahead of every high request that arrived more than 3 * aging_s after it
    assert low.admitted_s <= 3 * 10.0 + 2
    assert low.status is RequestStatus.FINISHED_LENGTH


def test_head_of_line_waiting_for_room_is_not_overtaken() -> None:
    sim = make_sim(n_cells=100, n_batch=200, decode_reserve=0)
    running = sim.add("run", prompt(1, 50), max_tokens=30)
    sim.step()
    big = sim.add("big", prompt(2, 60), priority=1)  # cannot fit yet
    small = sim.add("small", prompt(3, 5), priority=0)  # would fit
    plan = sim.step()
    assert plan.admitted == []
    assert big.status is small.status is RequestStatus.WAITING
    sim.run(lambda: big.seq is not None)
    assert running.status.finished  # big waited until the running request made room
    assert small.admitted_s is None or small.admitted_s == big.admitted_s
    sim.run(lambda: not sim.sched.waiting)
    admitted = [r.request_id for p in sim.plans for r in p.admitted]
    assert admitted == ["run", "big", "small"]


# ----- sequence ids and room -----------------------------------------------------------------


def test_requests_queue_when_no_seq_id_is_free() -> None:
    sim = make_sim(n_seqs=2)
    reqs = [sim.add(f"r{i}", prompt(i + 1, 5), max_tokens=3) for i in range(3)]
    plan = sim.step()
    assert plan.admitted == reqs[:2]
    assert reqs[2].status is RequestStatus.WAITING
    assert sim.sched.queue_position(reqs[2]) == 1
    sim.step()
    assert reqs[2].status is RequestStatus.WAITING
    sim.run(lambda: reqs[2].seq is not None)
    assert reqs[0].status.finished and reqs[1].status.finished
    assert reqs[2].num_cached == 0
    sim.run(lambda: not sim.core.has_work())
    assert reqs[2].output_tokens == [SAMPLED] * 3


def test_waiting_request_holds_back_for_an_inflight_shared_prefix() -> None:
    sim = make_sim(n_batch=64)
    shared = prompt(9, 100)
    a = sim.add("a", shared + prompt(1, 10), max_tokens=10)
    sim.step()  # a computes 64 of its 110 tokens
    b = sim.add("b", shared + prompt(2, 10), max_tokens=10)
    plan = sim.step()  # a computes the last 46; 18 tokens of budget are left
    assert plan.num_tokens == 46
    assert b.status is RequestStatus.WAITING  # 36 more shared tokens are coming
    plan = sim.step()
    assert plan.admitted == [b]
    assert b.num_cached == 100
    assert chunk_of(plan, b).start == 100
    assert sim.runner.kv.copies() == [("cp", a.seq, b.seq, 0, 100)]


def test_short_inflight_prefix_is_not_worth_waiting_for() -> None:
    sim = make_sim(n_batch=64)
    shared = prompt(9, 64 + MIN_SHARED_WAIT - 1)
    sim.add("a", shared + prompt(1, 10), max_tokens=10)
    sim.step()
    b = sim.add("b", shared + prompt(2, 10), max_tokens=10)
    plan = sim.step()
    assert plan.admitted == [b]
    assert b.num_cached == 64  # what a had computed by then


def test_request_admitted_in_the_same_step_is_waited_for() -> None:
    sim = make_sim(n_batch=256)
    shared = prompt(9, 80)
    a = sim.add("a", [*shared, 1], max_tokens=2)
    b = sim.add("b", [*shared, 2], max_tokens=2)
    plan = sim.step()
    assert plan.admitted == [a]
    plan = sim.step()
    assert plan.admitted == [b] and b.num_cached == 80


def test_next_turn_continues_its_own_sequence() -> None:
    sim = make_sim()
    turn1 = sim.add("t1", prompt(1, 20), max_tokens=3)
    sim.run(lambda: turn1.status.finished)
    idle = [s for s in range(sim.kv.n_seqs) if sim.kv.state(s) is SeqState.IDLE]
    history = list(turn1.tokens)  # prompt + 3 outputs; the last was never fed back
    turn2 = sim.add("t2", history + prompt(2, 6), max_tokens=2)
    plan = sim.step()
    assert plan.admitted == [turn2]
    assert [turn2.seq] == idle
    assert turn2.num_cached == len(history) - 1
    assert sim.runner.kv.copies() == []


def test_long_idle_chat_sharing_the_system_prompt_does_not_block_a_new_chat() -> None:
    sim = make_sim(n_cells=128, decode_reserve=4)
    system = prompt(9, 20)
    old = sim.add("old", system + prompt(1, 80), max_tokens=10)
    sim.run(lambda: old.status.finished)
    assert sim.kv.cells_used == 109 and not sim.sched.running
    new = sim.add("new", system + prompt(2, 40), max_tokens=2)
    plan = sim.step()
    assert plan.admitted == [new]  # nothing runs: a refusal here would never clear
    assert new.num_cached == 20
    sim.run(lambda: new.status.finished)
    assert sim.final("new").finish_reason is FinishReason.LENGTH


# ----- preemption -------------------------------------------------------------------------------


def test_preemption_when_cells_run_out() -> None:
    sim = make_sim(n_cells=40, decode_reserve=2)
    a = sim.add("a", prompt(1, 10), max_tokens=100, priority=1)
    b = sim.add("b", prompt(2, 10), max_tokens=100)
    sim.step()
    assert a.seq is not None and b.seq is not None
    preempted = []
    for _ in range(20):
        plan = sim.step()
        preempted += plan.preempted
        if preempted:
            break
    assert preempted == [b]  # the lower-priority one goes
    assert b.status is RequestStatus.WAITING
    assert b.num_computed == 0 and b.seq is None and b.preemptions == 1
    assert b in sim.sched.waiting and b not in sim.sched.running
    assert sim.of("b")[-1].phase is Phase.QUEUED  # the tab shows it queued again
    assert chunk_of(plan, b) is None
    assert chunk_of(plan, a).is_decode
    assert sim.kv.stats().seqs_active == 1
    generated = b.num_output
    assert generated > 0
    # b comes back once a is done and recomputes prompt + what it had generated
    a.sampling = SamplingParams.greedy(max_tokens=a.num_output + 1)
    sim.run(lambda: b in sim.plans[-1].admitted)
    readmitted = chunk_of(sim.plans[-1], b)
    assert readmitted.start == 0
    assert readmitted.n_tokens == 10 + generated  # prompt and its own outputs again
    assert b.num_output == generated + 1  # and it goes on from where it was
    assert b.tokens[:10] == prompt(2, 10)
    assert sim.core.metrics.preemptions == 1


def test_failed_decode_prefers_evicting_an_idle_sequence_to_preempting() -> None:
    sim = make_sim()
    done = sim.add("done", prompt(1, 10), max_tokens=1)
    sim.step()
    assert done.status.finished and sim.kv.stats().seqs_idle == 1
    live = sim.add("live", prompt(2, 10), max_tokens=50)
    sim.step()
    sim.runner.fail_next(1)
    sim.step()
    assert sim.kv.stats().seqs_idle == 0
    assert live.status is RequestStatus.DECODING and live.preemptions == 0
    assert live.num_output == 2  # the retried step still decoded it


def test_failed_decode_preempts_the_last_in_order() -> None:
    sim = make_sim()
    first = sim.add("first", prompt(1, 10), max_tokens=50, priority=2)
    second = sim.add("second", prompt(2, 10), max_tokens=50, priority=0)
    sim.step()
    sim.step()
    sim.runner.fail_next(1)
    sim.step()
    failed, retried = sim.plans[-2:]
    assert [c.request for c in failed.chunks] == [first, second]
    assert second.preemptions == 1 and first.preemptions == 0
    assert retried.admitted == [second]  # back at once, from scratch: its KV was dropped
    assert chunk_of(retried, second).start == 0
    assert sim.sched.running == [first, second]
    assert sim.runner.kv.used == sim.kv.cells_used == first.num_computed + second.num_computed


def test_make_room_after_failed_decode_with_nothing_running() -> None:
    sim = make_sim()
    assert sim.sched.make_room_after_failed_decode() is None


# ----- finishing ------------------------------------------------------------------------------


def test_cancel_keeps_the_cache_and_a_failed_decode_drops_it() -> None:
    sim = make_sim()
    a = sim.add("a", prompt(1, 10), max_tokens=50)
    b = sim.add("b", prompt(2, 10), max_tokens=50)
    sim.step()
    seq_a, seq_b = a.seq, b.seq
    sim.core.cancel("a")
    sim.runner.fail_next(1, code=-1)
    sim.step()
    assert sim.final("b").finish_reason is FinishReason.ERROR
    assert a.seq is None and b.seq is None
    assert sim.kv.state(seq_a) is SeqState.IDLE
    assert sim.kv.state(seq_b) is SeqState.FREE
    assert not sim.core.has_work()


def test_finish_of_a_waiting_request_removes_it() -> None:
    sim = make_sim(n_seqs=1)
    sim.add("a", prompt(1, 10), max_tokens=50)
    b = sim.add("b", prompt(2, 10), max_tokens=50)
    sim.step()
    sim.core.cancel("b")
    assert b not in sim.sched.waiting and b.status is RequestStatus.FINISHED_CANCELLED


def test_pinned_prefill_only_request_keeps_its_prefix_pinned() -> None:
    sim = make_sim()
    system = prompt(1, 30)
    pin = sim.add("pin", system, max_tokens=0, pin=True)
    plan = sim.step()
    assert [c.wants_logits for c in plan.chunks] == [False]
    assert pin.status is RequestStatus.FINISHED_STOPPED
    assert sim.final("pin").finish_reason is FinishReason.STOP
    seq = sim.kv.pinned_seq_for(system)
    assert seq is not None and sim.kv.state(seq) is SeqState.PINNED
    chat = sim.add("chat", system + prompt(2, 5), max_tokens=2)
    sim.step()
    assert chat.num_cached == 30
    assert sim.kv.state(seq) is SeqState.PINNED


def test_fully_cached_prefill_only_request_gets_no_chunk() -> None:
    sim = make_sim()
    system = prompt(1, 30)
    sim.add("p1", system, max_tokens=0, pin=True)
    sim.step()
    executed = len(sim.runner.executed)
    again = sim.add("p2", system, max_tokens=0)
    plan = sim.step()
    assert plan.admitted == [again] and plan.chunks == []
    assert again.num_uncomputed == 0
    assert sim.final("p2").finish_reason is FinishReason.STOP
    assert len(sim.runner.executed) == executed  # the model was not called


# ----- a longer mixed run ------------------------------------------------------------------------


@pytest.mark.parametrize("n_cells", [160, 400])
def test_mixed_load_finishes_everything_within_the_kv_cache(n_cells: int) -> None:
    sim = make_sim(n_cells=n_cells, n_seqs=4, n_batch=48, decode_reserve=4)
    system = prompt(9, 40)
    reqs = []
    for i in range(12):
        reqs.append(sim.add(f"r{i}", system + prompt(i + 1, 5 + 7 * (i % 4)), max_tokens=3 + i % 5, priority=i % 3))
        sim.step()
    sim.run(lambda: not sim.core.has_work(), max_steps=500)
    assert all(r.status is RequestStatus.FINISHED_LENGTH for r in reqs)
    assert all(r.num_output == r.sampling.max_tokens for r in reqs)
    assert max(p.num_tokens for p in sim.plans) <= 48
    assert sum(r.num_cached for r in reqs) > 0  # the system prompt was shared
    assert sim.runner.samplers == {}


def test_identical_prompt_waits_for_the_last_tokens_of_one_in_flight() -> None:
    """n choices of one prompt whose prefill takes two steps: the follower arrives when fewer
    than MIN_SHARED_WAIT tokens are left to compute, and still computes only its last token."""
    sim = make_sim(n_batch=64)
    p = prompt(9, 64 + MIN_SHARED_WAIT - 1)
    a = sim.add("a", p, max_tokens=4)
    sim.step()  # a computes 64 of its 95 tokens
    b = sim.add("b", p, max_tokens=4)
    plan = sim.step()
    assert plan.admitted == [] and b.status is RequestStatus.WAITING
    sim.run(lambda: b.seq is not None)
    assert b.num_cached == len(p) - 1
    assert sim.runner.kv.copies()[-1] == ("cp", a.seq, b.seq, 0, len(p) - 1)
