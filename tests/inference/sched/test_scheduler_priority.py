"""Priorities that follow the user: Scheduler.set_priority, and a higher-priority request
taking the sequence of a lower one that is still prefilling.

Run in the real EngineCore on the fake runner (tests/support/core_driver.py): each step takes 1 s of
fake time, so waiting is counted in steps.
"""

from __future__ import annotations

import functools

from inference.outputs import Phase
from inference.params import PRIORITY_TAB, PRIORITY_VISIBLE_TAB, SPARE_PRIORITY
from inference.request import Request, RequestStatus
from tests.support.core_driver import SAMPLED, Driver, chunk_of, make_sim, prompt

# n_batch=64 (make_sim's): a 200-token prompt prefills over several steps, long enough to be
# caught prefilling; 4,096 cells unless a test says.
make_sim = functools.partial(make_sim, n_cells=4096)


def first_token_index(sim: Driver, name: str) -> int | None:
    """Index in sim.plans of the step that sampled name's first token."""
    for i, plan in enumerate(sim.plans):
        if any(c.request.request_id == name and c.wants_logits for c in plan.chunks):
            return i
    return None


def admitted_index(sim: Driver, name: str) -> int | None:
    for i, plan in enumerate(sim.plans):
        if any(r.request_id == name for r in plan.admitted):
            return i
    return None


def assert_whole_output(sim: Driver, req: Request, max_tokens: int) -> None:
    """Finished with exactly its output: nothing lost or repeated by preemptions."""
    assert req.status is RequestStatus.FINISHED_LENGTH
    assert req.output_tokens == [SAMPLED] * max_tokens
    assert "".join(d.text for d in sim.of(req.request_id)) == chr(SAMPLED) * max_tokens


def test_raising_a_waiting_request_puts_it_first_in_the_queue() -> None:
    sim = make_sim(n_seqs=1)
    sim.add("busy", prompt(0, 8), max_tokens=6)
    sim.step()
    queued = [sim.add(f"c{i}", prompt(i + 1, 8), max_tokens=2) for i in range(4)]
    assert sim.sched.next_waiting() is queued[0]
    assert sim.core.set_priority("c3", PRIORITY_VISIBLE_TAB)
    assert sim.sched.next_waiting() is queued[3] and sim.sched.queue_position(queued[3]) == 1
    sim.run(lambda: queued[3].status is not RequestStatus.WAITING)
    assert all(r.status is RequestStatus.WAITING for r in queued[:3])  # it went first
    assert not sim.core.set_priority("no-such-request", 5)


def test_a_higher_priority_arrival_takes_the_sequence_of_a_lower_prefilling_request() -> None:
    sim = make_sim(n_seqs=1)
    low = sim.add("low", prompt(1, 200), max_tokens=5, priority=PRIORITY_TAB)
    sim.step()
    assert low.status is RequestStatus.PREFILLING and 0 < low.num_computed < 200
    tab = sim.add("tab", prompt(2, 8), max_tokens=3, priority=PRIORITY_VISIBLE_TAB)
    plan = sim.step()
    assert plan.preempted == [low] and plan.admitted == [tab]
    assert chunk_of(plan, tab) is not None and chunk_of(plan, low) is None
    assert low.status is RequestStatus.WAITING and low.preemptions == 1
    assert sim.of("low")[-1].phase is Phase.QUEUED
    assert any(d.token_ids for d in sim.of("tab"))  # its first token in that same step
    sim.run(lambda: not sim.sched.has_work())
    assert_whole_output(sim, tab, 3)
    assert_whole_output(sim, low, 5)  # restarted cleanly once the tab was done


def test_a_raised_request_preempts_the_prefill_that_was_ahead_of_it() -> None:
    sim = make_sim(n_seqs=1)
    first = sim.add("first", prompt(1, 200), max_tokens=2)
    second = sim.add("second", prompt(2, 8), max_tokens=2)
    sim.step()
    assert first.status is RequestStatus.PREFILLING
    sim.core.set_priority("second", PRIORITY_VISIBLE_TAB)
    plan = sim.step()
    assert plan.preempted == [first] and plan.admitted == [second]
    sim.run(lambda: not sim.sched.has_work())
    assert_whole_output(sim, first, 2)
    assert_whole_output(sim, second, 2)


def test_a_prefill_is_not_preempted_for_a_request_that_would_not_fit_anyway() -> None:
    sim = make_sim(n_seqs=2, n_cells=256)
    dec = sim.add("dec", prompt(1, 100), max_tokens=50, priority=PRIORITY_VISIBLE_TAB)  # not preemptible by big
    sim.run(lambda: dec.is_decoding)
    low = sim.add("low", prompt(2, 100), max_tokens=2)
    sim.step()
    assert low.status is RequestStatus.PREFILLING
    big = sim.add("big", prompt(3, 200), max_tokens=2, priority=PRIORITY_VISIBLE_TAB)
    plan = sim.step()  # 200 cells: not there while dec holds its 100, with or without low
    assert not plan.preempted and chunk_of(plan, low) is not None and big.status is RequestStatus.WAITING
    sim.run(lambda: not sim.sched.has_work(), max_steps=300)
    assert_whole_output(sim, big, 2)


def test_the_visible_tab_preempts_a_lower_decoding_request_which_resumes_losing_nothing() -> None:
    """Every sequence is writing: the tab the user looks at does not wait for a background
    reply to end. The background one goes back to the queue with its KV cached, resumes
    from there, and its text is whole and in order."""
    sim = make_sim(n_seqs=1)
    low = sim.add("low", prompt(1, 8), max_tokens=6)
    sim.run(lambda: low.is_decoding and low.num_output >= 2)
    tab = sim.add("tab", prompt(2, 8), max_tokens=2, priority=PRIORITY_VISIBLE_TAB)
    plan = sim.step()
    assert plan.preempted == [low] and plan.admitted == [tab] and chunk_of(plan, low) is None
    assert low.status is RequestStatus.WAITING and low.preemptions == 1
    sim.run(lambda: not sim.sched.has_work(), max_steps=100)
    assert_whole_output(sim, tab, 2)
    assert_whole_output(sim, low, 6)


def test_a_decoding_request_keeps_its_sequence_for_a_raised_background_tab() -> None:
    """Only the visible tab preempts a reply being written; other tabs wait their turn."""
    sim = make_sim(n_seqs=1)
    low = sim.add("low", prompt(1, 8), max_tokens=6)
    sim.run(lambda: low.is_decoding)
    other = sim.add("other", prompt(2, 8), max_tokens=2, priority=PRIORITY_TAB)
    plan = sim.step()
    assert not plan.preempted and other.status is RequestStatus.WAITING and low.preemptions == 0


def test_an_equal_or_lower_arrival_does_not_preempt_a_prefill() -> None:
    sim = make_sim(n_seqs=1)
    low = sim.add("low", prompt(1, 200), max_tokens=2, priority=PRIORITY_TAB)
    sim.step()
    sim.add("same", prompt(2, 8), max_tokens=2, priority=PRIORITY_TAB)
    sim.add("lower", prompt(3, 8), max_tokens=2)
    plan = sim.step()
    assert not plan.preempted and chunk_of(plan, low) is not None


def test_aging_lets_a_low_request_run_while_higher_ones_keep_arriving() -> None:
    """No request waits forever: with one level of aging per 2 s, a priority-0 request
    outranks fresh visible-tab requests after 20 s, though they keep coming."""
    sim = make_sim(n_seqs=1, aging_s=2.0)
    sim.add("busy", prompt(0, 8), max_tokens=3, priority=PRIORITY_VISIBLE_TAB)
    old = sim.add("old", prompt(1, 8), max_tokens=2)
    n = 0
    while old.status is RequestStatus.WAITING:
        assert n < 60, "the low-priority request starved"
        sim.add(f"tab{n}", prompt(10 + n, 8), max_tokens=2, priority=PRIORITY_VISIBLE_TAB)
        n += 1
        sim.step()
    assert any(r.priority == PRIORITY_VISIBLE_TAB for r in sim.sched.waiting)  # aging, not an empty queue
    sim.run(lambda: old.status.finished)
    assert_whole_output(sim, old, 2)


def test_a_request_lowered_to_spare_gives_its_sequence_back() -> None:
    sim = make_sim(n_seqs=1)
    bg = sim.add("bg", prompt(1, 8), max_tokens=20)
    sim.run(lambda: bg.is_decoding)
    tab = sim.add("tab", prompt(2, 8), max_tokens=2)
    sim.step()
    assert tab.status is RequestStatus.WAITING  # same priority, later: it waits
    sim.core.set_priority("bg", SPARE_PRIORITY)
    plan = sim.step()
    assert bg in plan.preempted and tab in plan.admitted
    sim.run(lambda: not sim.sched.has_work(), max_steps=300)
    assert_whole_output(sim, bg, 20)


def test_spare_work_never_preempts_a_prefill_even_of_lower_spare_work() -> None:
    sim = make_sim(n_seqs=1)
    lowest = sim.add("lowest", prompt(1, 200), max_tokens=2, priority=SPARE_PRIORITY - 1)
    sim.step()
    assert lowest.status is RequestStatus.PREFILLING
    sim.add("title", prompt(2, 8), max_tokens=2, priority=SPARE_PRIORITY)
    plan = sim.step()
    assert not plan.preempted and chunk_of(plan, lowest) is not None


def test_spare_work_still_yields_to_a_raised_request() -> None:
    sim = make_sim(n_seqs=2)
    title = sim.add("title", prompt(1, 8), max_tokens=30, priority=SPARE_PRIORITY)
    other = sim.add("other", prompt(2, 8), max_tokens=30)
    sim.run(lambda: title.is_decoding and other.is_decoding)
    tab = sim.add("tab", prompt(3, 8), max_tokens=2, priority=PRIORITY_TAB)
    plan = sim.step()
    assert title in plan.preempted and tab in plan.admitted and other.preemptions == 0


def test_the_chat_switched_to_among_12_queued_starts_at_the_next_step_and_all_finish() -> None:
    """Issue 12: 12 chats queued on 4 sequences; the user switches to the last one while
    another holds a sequence prefilling. The switched-to chat is admitted at the very next
    step and samples its first token before any chat queued ahead of it is admitted; the
    others still all finish, each with its whole reply."""
    sim = make_sim(n_seqs=4)
    chats = [sim.add(f"chat{i}", prompt(i + 1, 200), max_tokens=8, priority=PRIORITY_TAB) for i in range(12)]
    target = chats[-1]
    # Until some chats have replied and another holds the step's prompt budget prefilling.
    sim.run(lambda: sum(r.status.finished for r in chats) >= 2
            and any(not r.is_decoding for r in sim.sched.running))
    ahead = [r for r in chats[:-1] if r.status is RequestStatus.WAITING]
    assert ahead and target.status is RequestStatus.WAITING
    switched_at = len(sim.plans)
    sim.core.set_priority("chat11", PRIORITY_VISIBLE_TAB)
    plan = sim.step()
    assert admitted_index(sim, "chat11") == switched_at  # within one step
    # it takes the step's prompt budget first, from the prefill that held it
    assert [c.request for c in plan.chunks if not c.is_decode][0] is target
    sim.run(lambda: not sim.sched.has_work(), max_steps=500)
    first = first_token_index(sim, "chat11")
    assert first is not None
    for req in ahead:
        index = admitted_index(sim, req.request_id)
        assert index is not None and index > first, f"{req.request_id} was admitted before the switched-to chat"
    for req in chats:
        assert_whole_output(sim, req, 8)
