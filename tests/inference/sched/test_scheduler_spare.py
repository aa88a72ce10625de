"""Spare-capacity requests (priority below 0, the app's chat titles) never delay a tab.

Run in the real EngineCore on the fake runner (tests/support/core_driver.py): each step takes 1 s of
fake time, so a request's time to first token is counted in steps.
"""

from __future__ import annotations

from inference.outputs import Phase
from inference.params import PRIORITY_TAB, PRIORITY_VISIBLE_TAB, SPARE_PRIORITY
from inference.request import Request, RequestStatus
from tests.support.core_driver import SAMPLED, Driver, make_sim, prompt

FOREGROUND, BACKGROUND = 1, 0


def first_token_step(sim: Driver, name: str) -> int:
    """Steps from now until the request's first sampled token (its TTFT in fake seconds)."""
    return sim.run(lambda: any(d.token_ids for d in sim.of(name)))


def tab_ttft_with(other_priority: int | None, n_seqs: int = 2) -> tuple[Driver, int]:
    """A background chat writes; another request (the title) may be decoding too; then the
    user sends in the visible tab. Returns the steps to the tab's first token."""
    sim = make_sim(n_seqs=n_seqs)
    sim.add("background", prompt(1, 8), max_tokens=60, priority=BACKGROUND)
    if other_priority is not None:
        sim.add("title", prompt(2, 30), max_tokens=40, priority=other_priority)
    sim.run(lambda: all(r.is_decoding for r in sim.sched.running) and not sim.sched.waiting)
    sim.add("tab", prompt(3, 8), max_tokens=5, priority=FOREGROUND)
    return sim, first_token_step(sim, "tab")


def test_a_title_request_does_not_delay_the_first_token_of_a_tab_when_slots_run_out() -> None:
    _, alone = tab_ttft_with(None)
    sim, with_title = tab_ttft_with(SPARE_PRIORITY)
    assert with_title == alone == 1  # admitted, prefilled and sampled in its first step
    title = next(r for r in sim.sched.waiting + sim.sched.running if r.request_id == "title")
    assert title.status is RequestStatus.WAITING and title.preemptions == 1  # it gave its slot back
    assert sim.of("title")[-1].phase is Phase.QUEUED
    # ...and finishes once there is room again, with its whole output
    sim.run(lambda: title.status.finished, max_steps=300)
    assert title.status is RequestStatus.FINISHED_LENGTH and title.output_tokens == [SAMPLED] * 40
    assert "".join(d.text for d in sim.of("title")) == chr(SAMPLED) * 40


def test_the_same_request_at_background_priority_does_delay_the_tab() -> None:
    """What the spare priority prevents: a request holding the last slot makes the tab wait."""
    _, alone = tab_ttft_with(None)
    _, with_background = tab_ttft_with(BACKGROUND)
    assert with_background > alone


def test_a_spare_request_waits_behind_newer_requests_however_old() -> None:
    sim = make_sim(n_seqs=1)
    sim.add("busy", prompt(1, 5), max_tokens=3)
    sim.step()
    title = sim.add("title", prompt(2, 5), max_tokens=3, priority=SPARE_PRIORITY)
    sim.clock.now += 3600  # an hour of aging would put a priority-0 request first
    later = sim.add("later", prompt(3, 5), max_tokens=3, priority=BACKGROUND)
    assert sim.sched.queue_position(later) == 1 and sim.sched.queue_position(title) == 2
    sim.run(lambda: not sim.core.has_work())
    admitted = [r.request_id for p in sim.plans for r in p.admitted]
    assert admitted == ["busy", "later", "title"]


def test_a_spare_request_runs_beside_others_when_there_is_room() -> None:
    sim = make_sim(n_seqs=4)
    chat = sim.add("chat", prompt(1, 5), max_tokens=6)
    title = sim.add("title", prompt(2, 5), max_tokens=6, priority=SPARE_PRIORITY)
    plan = sim.step()
    assert plan.admitted == [chat, title] and not plan.preempted
    sim.run(lambda: not sim.core.has_work())
    assert title.preemptions == 0 and title.status is RequestStatus.FINISHED_LENGTH


def test_a_spare_request_gives_back_its_cells_to_a_tab_that_needs_them() -> None:
    sim = make_sim(n_seqs=4, n_cells=64)
    title = sim.add("title", prompt(1, 30), max_tokens=20, priority=SPARE_PRIORITY)
    sim.run(lambda: title.is_decoding)
    tab: Request = sim.add("tab", prompt(2, 30), max_tokens=5, priority=FOREGROUND)
    plan = sim.step()  # 30 + 30 prompt cells and their decode reserves do not fit in 64
    assert plan.preempted == [title] and plan.admitted == [tab]
    sim.run(lambda: tab.status.finished)
    sim.run(lambda: title.status.finished, max_steps=300)
    assert title.status is RequestStatus.FINISHED_LENGTH and len(title.output_tokens) == 20


def test_a_tab_queued_after_a_waiting_title_is_told_it_is_first() -> None:
    """Issue 39, defect 7: the position a new request was told was the queue's length, so a
    chat sent while a title waited read "queued (position 2)" though it goes first."""
    sim = make_sim(n_seqs=1)
    sim.add("busy", prompt(1, 5), max_tokens=3)
    sim.step()
    sim.add("title", prompt(2, 5), max_tokens=3, priority=SPARE_PRIORITY)
    sim.add("tab", prompt(3, 5), max_tokens=3, priority=FOREGROUND)
    assert (sim.of("tab")[0].phase, sim.of("tab")[0].progress) == (Phase.QUEUED, (1, 5))
    assert sim.of("title")[0].progress == (1, 5)  # first then; behind the tab now
    sim.run(lambda: any(d.token_ids for d in sim.of("tab")))
    assert not any(d.token_ids for d in sim.of("title"))


def test_a_job_steps_aside_while_the_visible_tab_writes_though_sequences_are_free() -> None:
    """Issue 37: a job's items decoded beside the focused tab's reply, each step carrying
    their rows (what slowed the chat typed while a job ran). They go back to the queue when
    the tab's request arrives, with their KV kept, wait while it writes, then resume."""
    sim = make_sim(n_seqs=8)
    items = [sim.add(f"item{i}", prompt(10 + i, 12), max_tokens=20, priority=SPARE_PRIORITY) for i in range(3)]
    sim.run(lambda: all(r.is_decoding for r in items))
    tab = sim.add("tab", prompt(3, 8), max_tokens=6, priority=PRIORITY_VISIBLE_TAB)
    plan = sim.step()
    assert plan.admitted == [tab] and set(plan.preempted) == set(items)
    assert [c.request for c in plan.chunks] == [tab]
    while not tab.status.finished:
        plan = sim.step()
        assert [c.request for c in plan.chunks] == [tab]  # the tab decodes alone
    sim.run(lambda: all(r.status.finished for r in items), max_steps=300)
    assert all(r.status is RequestStatus.FINISHED_LENGTH and r.output_tokens == [SAMPLED] * 20 for r in items)


def test_a_job_item_waiting_is_not_admitted_while_the_visible_tab_writes() -> None:
    sim = make_sim(n_seqs=4)
    tab = sim.add("tab", prompt(3, 8), max_tokens=5, priority=PRIORITY_VISIBLE_TAB)
    item = sim.add("item", prompt(4, 8), max_tokens=5, priority=SPARE_PRIORITY)
    sim.run(lambda: tab.status.finished)
    assert item.status is RequestStatus.WAITING and not any(r is item for p in sim.plans for r in p.admitted)
    sim.run(lambda: item.status.finished)
    assert item.status is RequestStatus.FINISHED_LENGTH


def test_other_tabs_and_api_requests_still_share_the_batch_with_spare_work() -> None:
    sim = make_sim(n_seqs=4)
    item = sim.add("item", prompt(4, 8), max_tokens=8, priority=SPARE_PRIORITY)
    sim.run(lambda: item.is_decoding)
    other = sim.add("other", prompt(3, 8), max_tokens=5, priority=PRIORITY_TAB)
    plan = sim.step()
    assert not plan.preempted and {c.request for c in plan.chunks} == {item, other}


def test_a_jobs_items_churning_through_the_sequences_leave_the_idle_chats_kv_cached() -> None:
    """The chat the user types in idles between turns while a job's items finish and new
    ones are admitted, each needing a sequence: they evict the job's own idle sequences,
    never the chat's. Before, the chat's (least recently used) went at the first admission
    and its next turn computed the whole conversation again (bench-jobs: the chat's TTFT
    beside the job 1.58x of alone on a quiet machine, growing with each turn)."""
    sim = make_sim(n_seqs=3)
    first = prompt(1, 40)
    chat = sim.add("chat", first, max_tokens=4, priority=PRIORITY_VISIBLE_TAB)
    sim.run(lambda: chat.status.finished)
    for item in range(6):  # more items than sequences, two at a time
        pair = [sim.add(f"item{item}{side}", prompt(10 + 2 * item + side, 12), max_tokens=3,
                        priority=SPARE_PRIORITY) for side in (0, 1)]
        sim.run(lambda pair=pair: all(r.status.finished for r in pair), max_steps=100)
    turn = first + chat.output_tokens + prompt(99, 5)  # the next message, after the reply
    again = sim.add("chat-2", turn, max_tokens=2, priority=PRIORITY_VISIBLE_TAB)
    sim.run(lambda: again.status.finished)
    assert again.num_cached >= len(first) + len(chat.output_tokens) - 1  # its conversation from the cache
